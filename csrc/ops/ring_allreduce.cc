// Ring allreduce (Patarasuk & Yuan 2009): a reduce-scatter followed by an allgather around the
// ring r -> r+1. With n ranks and a buffer of B bytes cut into n segments:
//   reduce-scatter: n-1 steps; at step s rank r sends segment (r-s-1) mod n to its right and
//                   reduces segment (r-s-2) mod n received from its left; afterwards rank r
//                   holds the fully reduced segment r.
//   allgather:      n-1 steps; at step s rank r forwards segment (r-s) mod n and receives
//                   segment (r-s-1) mod n.
// Each rank sends and receives 2(n-1)/n * B bytes, the lower bound for allreduce, in 2(n-1)
// steps. Inside a reduce-scatter step the segment travels in chunks (HOROVOD_RING_CHUNK_BYTES)
// through two alternating scratch buffers: chunk k+1 is in flight while chunk k is reduced, and
// each chunk is reduced while it is still in cache. Out of place (src != dst) costs no extra
// pass: the first step sends from src, and every reduction writes dst = src (op) received, since
// each rank reduces each segment exactly once.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/reduce_kernels.h"
#include "common/watch_progress.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"
#include "ops/ring_steps.h"

namespace hvd {
namespace {

constexpr int kReduceScatterTag = 100;
constexpr int kAllgatherTag = 200;

}  // namespace

void RingReduceScatter(const void* src, void* dst, DataType dtype, ReduceOp op, const Segments& seg,
                       size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const size_t esize = DataTypeSize(dtype);
  if (n == 1) {
    if (src != dst) std::memcpy(dst, src, (seg.offset[0] + seg.count[0]) * esize);
    return;
  }
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  const size_t chunk = std::max<size_t>(1, chunk_bytes / esize);
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  std::vector<MPI_Request> sends;
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s - 1, n), recv_idx = RingMod(rank - s - 2, n);
    const size_t slen = seg.count[send_idx], rlen = seg.count[recv_idx];
    const size_t nsend = NumChunks(slen, chunk), nrecv = NumChunks(rlen, chunk);
    // Step 0 sends this rank's own data; later steps forward what the previous step reduced.
    const char* send_base = (s == 0 ? in : out) + seg.offset[send_idx] * esize;
    const char* recv_src = in + seg.offset[recv_idx] * esize;
    char* recv_dst = out + seg.offset[recv_idx] * esize;
    void* tmp[2] = {scratch->Get(0, std::min(rlen, chunk) * esize + 1),
                    scratch->Get(1, std::min(rlen, chunk) * esize + 1)};
    // At most two chunks in flight each way: enough to overlap transfer and reduction, few
    // enough that a rendezvous transport (TCP) is not swamped by concurrent large sends.
    MPI_Request recvs[2];
    auto post_recv = [&](size_t k) {
      HVD_MPI_CHECK(MPI_Irecv(tmp[k & 1], static_cast<int>(ChunkLen(rlen, chunk, k) * esize),
                              MPI_BYTE, left, kReduceScatterTag + s, comm, &recvs[k & 1]));
    };
    sends.assign(nsend, MPI_REQUEST_NULL);
    auto post_send = [&](size_t k) {
      if (k >= nsend) return;
      HVD_MPI_CHECK(MPI_Isend(send_base + k * chunk * esize,
                              static_cast<int>(ChunkLen(slen, chunk, k) * esize), MPI_BYTE, right,
                              kReduceScatterTag + s, comm, &sends[k]));
    };
    auto retire_send = [&](size_t k) {  // send k done: its slot goes to send k+2
      if (k >= nsend) return;
      HVD_MPI_CHECK(MPI_Wait(&sends[k], MPI_STATUS_IGNORE));
      post_send(k + 2);
    };
    post_recv(0);
    post_send(0);
    post_send(1);
    for (size_t k = 0; k < nrecv; ++k) {
      if (k + 1 < nrecv) post_recv(k + 1);
      HVD_MPI_CHECK(MPI_Wait(&recvs[k & 1], MPI_STATUS_IGNORE));
      WatchProgress();
      ReduceInto(recv_dst + k * chunk * esize, recv_src + k * chunk * esize, tmp[k & 1],
                 ChunkLen(rlen, chunk, k), dtype, op);
      retire_send(k);
    }
    for (size_t k = nrecv; k < nsend; ++k) retire_send(k);
  }
}

void RingAllgather(void* buf, size_t esize, const Segments& seg, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  if (n == 1) return;
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  char* base = static_cast<char*>(buf);
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s, n), recv_idx = RingMod(rank - s - 1, n);
    SendRecvBytes(base + seg.offset[send_idx] * esize, seg.count[send_idx] * esize, right,
                  base + seg.offset[recv_idx] * esize, seg.count[recv_idx] * esize, left,
                  kAllgatherTag + s, comm);
  }
}

void RingAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                   size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm,
                   const SegmentFn& finish) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  if (count == 0) return;
  const size_t esize = DataTypeSize(dtype);
  Segments seg = EvenSegments(count, n);
  RingReduceScatter(src, dst, dtype, op, seg, chunk_bytes, scratch, comm);
  if (finish) finish(static_cast<char*>(dst) + seg.offset[rank] * esize, seg.count[rank]);
  RingAllgather(dst, esize, seg, comm);
}

}  // namespace hvd
