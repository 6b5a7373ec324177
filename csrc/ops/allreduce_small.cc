// Allreduce for small buffers: every rank sends its whole buffer to every other rank at once
// (n-1 concurrent exchanges) and reduces the n contributions in rank order. One latency step
// instead of the ring's 2(n-1), at the price of (n-1)*B bytes sent per rank instead of
// 2(n-1)/n*B, so the engine uses it only up to HOROVOD_SMALL_ALLREDUCE_BYTES. Reducing in rank
// order makes the result bit-identical on every rank.
#include <cstring>
#include <vector>

#include "common/reduce_kernels.h"
#include "ops/cpu_collectives.h"

namespace hvd {

void DirectAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                     RingScratch* scratch, Comm& comm) {
  const int rank = comm.rank(), n = comm.size();
  const size_t bytes = count * DataTypeSize(dtype);
  char* slots = static_cast<char*>(scratch->Get(0, bytes * n + 1));  // slot q: rank q's data
  std::memcpy(slots + rank * bytes, src, bytes);
  std::vector<Transfer> reqs;
  reqs.reserve(2 * (n - 1));
  for (int q = 0; q < n; ++q)
    if (q != rank) reqs.push_back(comm.Irecv(slots + q * bytes, bytes, q, 400));
  for (int q = 0; q < n; ++q)
    if (q != rank) reqs.push_back(comm.Isend(src, bytes, q, 400));
  comm.WaitAll(&reqs);
  std::memcpy(dst, slots, bytes);
  for (int q = 1; q < n; ++q) ReduceInto(dst, slots + q * bytes, count, dtype, op);
}

}  // namespace hvd
