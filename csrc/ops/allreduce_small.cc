// Allreduce for small buffers: every rank sends its whole buffer to every other rank at once
// (n-1 concurrent exchanges) and reduces the n contributions in rank order. One latency step
// instead of the ring's 2(n-1), at the price of (n-1)*B bytes sent per rank instead of
// 2(n-1)/n*B, so the engine uses it only up to HOROVOD_SMALL_ALLREDUCE_BYTES. Reducing in rank
// order makes the result bit-identical on every rank.
#include <cstring>
#include <vector>

#include "common/reduce_kernels.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace hvd {

void DirectAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                     RingScratch* scratch, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const size_t bytes = count * DataTypeSize(dtype);
  char* slots = static_cast<char*>(scratch->Get(0, bytes * n + 1));  // slot q: rank q's data
  std::memcpy(slots + rank * bytes, src, bytes);
  std::vector<MPI_Request> reqs;
  reqs.reserve(2 * (n - 1));
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    reqs.emplace_back();
    HVD_MPI_CHECK(MPI_Irecv(slots + q * bytes, static_cast<int>(bytes), MPI_BYTE, q, 400, comm,
                            &reqs.back()));
  }
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    reqs.emplace_back();
    HVD_MPI_CHECK(MPI_Isend(src, static_cast<int>(bytes), MPI_BYTE, q, 400, comm, &reqs.back()));
  }
  HVD_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
  std::memcpy(dst, slots, bytes);
  for (int q = 1; q < n; ++q) ReduceInto(dst, slots + q * bytes, count, dtype, op);
}

}  // namespace hvd
