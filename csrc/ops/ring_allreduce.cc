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
//
// Over several tensors at once (a fused response) without a fusion buffer, the ring runs over
// the tensors laid back to back as one virtual buffer, and every transfer or reduction that
// spans tensor boundaries is cut into one piece per tensor:
//   send:   one message per piece of a chunk (every rank knows the layout, so the receiver cuts
//           the chunk the same way and posts one receive per piece);
//   reduce: the pieces arrive back to back in scratch and each is reduced straight from the
//           tensor's input into its output;
//   gather: one message per piece of a segment, received straight into the outputs.
// Same steps, bytes and cost as over one buffer, minus the two passes over every byte that
// packing the fusion buffer and unpacking it cost (2 B of memcpy for B bytes of gradients, on
// the core that computes), plus one message per piece. (An MPI datatype listing the pieces, one
// message per chunk, was measured first: 1.4x slower than the copies it saved, on shared
// memory; docs/benchmarks.md.) One buffer is the one-piece case.
#include <algorithm>
#include <climits>
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
constexpr size_t kMaxBlock = size_t(1) << 30;  // an MPI block length is an int

// The tensors back to back: element `off` of the virtual buffer is element off - start[i] of
// tensor i.
class Layout {
 public:
  explicit Layout(const TensorPieces& t) : t_(t) {
    start_.push_back(0);
    for (size_t c : t.count) start_.push_back(start_.back() + c);
  }
  size_t total() const { return start_.back(); }
  // f(tensor, element offset in it, elements) for each piece of [off, off + n), in order.
  template <typename F>
  void ForEach(size_t off, size_t n, F f) const {
    size_t i = std::upper_bound(start_.begin(), start_.end(), off) - start_.begin() - 1;
    while (n > 0 && i < t_.count.size()) {
      const size_t in = off - start_[i], take = std::min(n, t_.count[i] - in);
      if (take > 0) f(i, in, take);
      off += take;
      n -= take;
      ++i;
    }
  }
  // One message per piece (split at kMaxBlock) of [off, off + n) of the inputs (from_src) or
  // outputs: both ends know the layout, so they cut a range the same way.
  void PostSends(size_t off, size_t n, size_t esize, bool from_src, int dst, int tag, MPI_Comm comm,
                 std::vector<MPI_Request>* reqs) const {
    ForEach(off, n, [&](size_t i, size_t in, size_t take) {
      const char* p = static_cast<const char*>(from_src ? t_.src[i] : t_.dst[i]) + in * esize;
      for (size_t b = 0; b < take * esize; b += kMaxBlock) {
        reqs->emplace_back();
        HVD_MPI_CHECK(MPI_Isend(p + b, static_cast<int>(std::min(kMaxBlock, take * esize - b)),
                                MPI_BYTE, dst, tag, comm, &reqs->back()));
      }
    });
  }
  // Receives of the same pieces, into the outputs (into == nullptr) or back to back into `into`.
  void PostRecvs(size_t off, size_t n, size_t esize, char* into, int src, int tag, MPI_Comm comm,
                 std::vector<MPI_Request>* reqs) const {
    ForEach(off, n, [&](size_t i, size_t in, size_t take) {
      char* p = into ? into : static_cast<char*>(t_.dst[i]) + in * esize;
      for (size_t b = 0; b < take * esize; b += kMaxBlock) {
        reqs->emplace_back();
        HVD_MPI_CHECK(MPI_Irecv(p + b, static_cast<int>(std::min(kMaxBlock, take * esize - b)),
                                MPI_BYTE, src, tag, comm, &reqs->back()));
      }
      if (into) into += take * esize;
    });
  }
  static void WaitAll(std::vector<MPI_Request>* reqs) {
    HVD_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs->size()), reqs->data(), MPI_STATUSES_IGNORE));
    reqs->clear();
  }

 private:
  const TensorPieces& t_;
  std::vector<size_t> start_;
};

size_t Total(const Segments& seg) {  // the elements the segments cover
  size_t end = 0;
  for (size_t i = 0; i < seg.count.size(); ++i) end = std::max(end, seg.offset[i] + seg.count[i]);
  return end;
}

}  // namespace

TensorPieces OneTensor(const void* src, void* dst, size_t count) {
  TensorPieces t;
  t.src.push_back(src);
  t.dst.push_back(dst);
  t.count.push_back(count);
  return t;
}

TensorPieces SliceOfOutputs(const TensorPieces& t, size_t off, size_t n, size_t esize) {
  TensorPieces out;
  Layout(t).ForEach(off, n, [&](size_t i, size_t in, size_t take) {
    char* p = static_cast<char*>(t.dst[i]) + in * esize;
    out.src.push_back(p);
    out.dst.push_back(p);
    out.count.push_back(take);
  });
  return out;
}

void RingReduceScatterPieces(const TensorPieces& t, const Segments& seg, DataType dtype,
                             ReduceOp op, size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const Layout l(t);
  const size_t esize = DataTypeSize(dtype);
  if (n == 1) {  // nothing to reduce: the output is the input
    l.ForEach(0, l.total(), [&](size_t i, size_t in, size_t take) {
      if (t.src[i] != t.dst[i])
        CopyWithProgress(static_cast<char*>(t.dst[i]) + in * esize,
                         static_cast<const char*>(t.src[i]) + in * esize, take * esize);
    });
    return;
  }
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  const size_t chunk = std::max<size_t>(1, chunk_bytes / esize);
  std::vector<std::vector<MPI_Request>> sends;
  std::vector<MPI_Request> recvs[2];
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s - 1, n), recv_idx = RingMod(rank - s - 2, n);
    const size_t slen = seg.count[send_idx], rlen = seg.count[recv_idx];
    const size_t nsend = NumChunks(slen, chunk), nrecv = NumChunks(rlen, chunk);
    char* tmp[2] = {static_cast<char*>(scratch->Get(0, std::min(rlen, chunk) * esize + 1)),
                    static_cast<char*>(scratch->Get(1, std::min(rlen, chunk) * esize + 1))};
    auto post_recv = [&](size_t k) {
      l.PostRecvs(seg.offset[recv_idx] + k * chunk, ChunkLen(rlen, chunk, k), esize, tmp[k & 1],
                  left, kReduceScatterTag + s, comm, &recvs[k & 1]);
    };
    sends.assign(nsend, {});
    // Step 0 sends this rank's inputs; later steps forward what the previous step reduced.
    auto post_send = [&](size_t k) {
      if (k >= nsend) return;
      l.PostSends(seg.offset[send_idx] + k * chunk, ChunkLen(slen, chunk, k), esize, s == 0, right,
                  kReduceScatterTag + s, comm, &sends[k]);
    };
    auto retire_send = [&](size_t k) {
      if (k >= nsend) return;
      Layout::WaitAll(&sends[k]);
      post_send(k + 2);
    };
    post_recv(0);
    post_send(0);
    post_send(1);
    for (size_t k = 0; k < nrecv; ++k) {
      if (k + 1 < nrecv) post_recv(k + 1);
      Layout::WaitAll(&recvs[k & 1]);
      WatchProgress();
      const char* got = tmp[k & 1];
      l.ForEach(seg.offset[recv_idx] + k * chunk, ChunkLen(rlen, chunk, k),
                [&](size_t i, size_t in, size_t take) {
                  ReduceInto(static_cast<char*>(t.dst[i]) + in * esize,
                             static_cast<const char*>(t.src[i]) + in * esize, got, take, dtype, op);
                  got += take * esize;
                });
      retire_send(k);
    }
    for (size_t k = nrecv; k < nsend; ++k) retire_send(k);
  }
}

void RingAllgatherPieces(const TensorPieces& t, const Segments& seg, size_t esize, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  if (n == 1) return;
  const Layout l(t);
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s, n), recv_idx = RingMod(rank - s - 1, n);
    std::vector<MPI_Request> reqs;
    l.PostRecvs(seg.offset[recv_idx], seg.count[recv_idx], esize, nullptr, left, kAllgatherTag + s,
                comm, &reqs);
    l.PostSends(seg.offset[send_idx], seg.count[send_idx], esize, false, right, kAllgatherTag + s,
                comm, &reqs);
    Layout::WaitAll(&reqs);
    WatchProgress();
  }
}

void RingAllreducePieces(const TensorPieces& t, DataType dtype, ReduceOp op, size_t chunk_bytes,
                         RingScratch* scratch, MPI_Comm comm, const SegmentFn& finish) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const Layout l(t);
  const size_t esize = DataTypeSize(dtype);
  if (l.total() == 0) return;
  const Segments seg = EvenSegments(l.total(), n);
  RingReduceScatterPieces(t, seg, dtype, op, chunk_bytes, scratch, comm);
  if (finish)
    l.ForEach(seg.offset[rank], seg.count[rank], [&](size_t i, size_t in, size_t take) {
      finish(static_cast<char*>(t.dst[i]) + in * esize, take);
    });
  RingAllgatherPieces(t, seg, esize, comm);
}

void RingReduceScatter(const void* src, void* dst, DataType dtype, ReduceOp op, const Segments& seg,
                       size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm) {
  RingReduceScatterPieces(OneTensor(src, dst, Total(seg)), seg, dtype, op, chunk_bytes, scratch,
                          comm);
}

void RingAllgather(void* buf, size_t esize, const Segments& seg, MPI_Comm comm) {
  RingAllgatherPieces(OneTensor(buf, buf, Total(seg)), seg, esize, comm);
}

void RingAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                   size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm,
                   const SegmentFn& finish) {
  RingAllreducePieces(OneTensor(src, dst, count), dtype, op, chunk_bytes, scratch, comm, finish);
}

}  // namespace hvd
