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
//           the chunk the same way and posts one receive per piece), or per run of pieces that
//           lie back to back in memory on every rank (agreed first: see Layout);
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
#include <cstdint>
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
constexpr size_t kMaxBlock = size_t(1) << 30;  // an MPI block length is an int

// The tensors back to back: element `off` of the virtual buffer is element off - start[i] of
// tensor i. Messages go by runs: pieces that lie back to back in memory on every rank (outputs
// the bindings allocate as one block, slices of one input) travel as one message. Every rank
// must cut a range the same way, so the ranks agree on the runs first: one MPI_Allreduce of a
// bit per tensor boundary (AND), paid only by responses of several pieces.
class Layout {
 public:
  // Without a communicator the runs are the pieces (no agreement: local use only).
  Layout(const TensorPieces& t, size_t esize, MPI_Comm comm = MPI_COMM_NULL)
      : t_(t), esize_(esize) {
    start_.push_back(0);
    for (size_t c : t.count) start_.push_back(start_.back() + c);
    const size_t bounds = t.count.empty() ? 0 : t.count.size() - 1;
    std::vector<uint64_t> joined(2 * ((bounds + 63) / 64), 0);  // src bits, then dst bits
    const size_t words = joined.size() / 2;
    if (comm != MPI_COMM_NULL && bounds > 0) {
      for (size_t i = 0; i < bounds; ++i) {
        const size_t bytes = t.count[i] * esize;
        if (static_cast<const char*>(t.src[i]) + bytes == t.src[i + 1])
          joined[i / 64] |= uint64_t(1) << (i % 64);
        if (static_cast<char*>(t.dst[i]) + bytes == t.dst[i + 1])
          joined[words + i / 64] |= uint64_t(1) << (i % 64);
      }
      HVD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, joined.data(), static_cast<int>(joined.size()),
                                  MPI_UINT64_T, MPI_BAND, comm));
    }
    for (int side = 0; side < 2; ++side) {
      Runs& r = runs_[side];
      for (size_t i = 0; i < t.count.size(); ++i) {
        const bool joins = i > 0 && (joined[side * words + (i - 1) / 64] >> ((i - 1) % 64) & 1);
        if (joins) continue;
        r.start.push_back(start_[i]);
        r.base.push_back(side == 0 ? const_cast<char*>(static_cast<const char*>(t.src[i]))
                                   : static_cast<char*>(t.dst[i]));
      }
      r.start.push_back(start_.back());
    }
  }
  size_t total() const { return start_.back(); }
  // f(tensor, element offset in it, elements) for each piece of [off, off + n), in order.
  template <typename F>
  void ForEach(size_t off, size_t n, F f) const {
    Cut(start_, off, n, f);
  }
  // A chunk of the inputs that spans several runs travels packed: copied into `pack` and sent as
  // one message, which costs less than a message per run (docs/benchmarks.md). Every rank decides
  // alike from the agreed runs. Only the inputs: they are sent once (the first reduce-scatter
  // step); the outputs are written by reductions and the allgather, where a copy would cost a
  // pass more each time.
  bool Packed(size_t off, size_t n, bool from_src) const {
    if (!from_src || n == 0) return false;
    const std::vector<size_t>& st = runs_[0].start;
    const auto first = std::upper_bound(st.begin(), st.end(), off);
    return first != st.end() && *first < off + n;  // a run starts inside the range
  }
  // One message per run (split at kMaxBlock) of [off, off + n) of the inputs (from_src) or
  // outputs, or one through `pack` (chunk-sized) where Packed.
  void PostSends(size_t off, size_t n, bool from_src, char* pack, int dst, int tag, MPI_Comm comm,
                 std::vector<MPI_Request>* reqs) const {
    if (Packed(off, n, from_src)) {
      char* p = pack;
      ForEach(off, n, [&](size_t i, size_t in, size_t take) {
        std::memcpy(p, static_cast<const char*>(t_.src[i]) + in * esize_, take * esize_);
        p += take * esize_;
      });
      return Post(MPI_Isend, pack, n * esize_, dst, tag, comm, reqs);
    }
    const Runs& r = runs_[from_src ? 0 : 1];
    Cut(r.start, off, n, [&](size_t j, size_t in, size_t take) {
      Post(MPI_Isend, r.base[j] + in * esize_, take * esize_, dst, tag, comm, reqs);
    });
  }
  // Receives of what PostSends(off, n, from_src) sends, back to back into `into`, or (into ==
  // nullptr, from the outputs only) into the outputs.
  void PostRecvs(size_t off, size_t n, bool from_src, char* into, int src, int tag, MPI_Comm comm,
                 std::vector<MPI_Request>* reqs) const {
    if (into && Packed(off, n, from_src))
      return Post(MPI_Irecv, into, n * esize_, src, tag, comm, reqs);
    const Runs& r = runs_[from_src ? 0 : 1];
    Cut(r.start, off, n, [&](size_t j, size_t in, size_t take) {
      Post(MPI_Irecv, into ? into : r.base[j] + in * esize_, take * esize_, src, tag, comm, reqs);
      if (into) into += take * esize_;
    });
  }
  static void WaitAll(std::vector<MPI_Request>* reqs) {
    HVD_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs->size()), reqs->data(), MPI_STATUSES_IGNORE));
    reqs->clear();
  }

 private:
  // MPI_Isend or MPI_Irecv of `bytes` at p, in blocks of at most kMaxBlock.
  template <typename Op, typename Ptr>
  static void Post(Op op, Ptr p, size_t bytes, int peer, int tag, MPI_Comm comm,
                   std::vector<MPI_Request>* reqs) {
    for (size_t b = 0; b < bytes; b += kMaxBlock) {
      reqs->emplace_back();
      HVD_MPI_CHECK(op(p + b, static_cast<int>(std::min(kMaxBlock, bytes - b)), MPI_BYTE, peer, tag,
                       comm, &reqs->back()));
    }
  }
  struct Runs {
    std::vector<size_t> start;  // virtual offset of each run, then the total
    std::vector<char*> base;    // its first element
  };
  // f(part j, element offset in it, elements) for each part of [off, off + n) where part j
  // covers [start[j], start[j + 1]).
  template <typename F>
  static void Cut(const std::vector<size_t>& start, size_t off, size_t n, F f) {
    size_t j = std::upper_bound(start.begin(), start.end(), off) - start.begin() - 1;
    while (n > 0 && j + 1 < start.size()) {
      const size_t in = off - start[j], take = std::min(n, start[j + 1] - off);
      if (take > 0) f(j, in, take);
      off += take;
      n -= take;
      ++j;
    }
  }
  const TensorPieces& t_;
  size_t esize_;
  std::vector<size_t> start_;
  Runs runs_[2];  // of the inputs, of the outputs
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
  Layout(t, esize).ForEach(off, n, [&](size_t i, size_t in, size_t take) {
    char* p = static_cast<char*>(t.dst[i]) + in * esize;
    out.src.push_back(p);
    out.dst.push_back(p);
    out.count.push_back(take);
  });
  return out;
}

namespace {

// The reduce-scatter over the layout's pieces (n > 1 ranks).
void ReduceScatterOver(const Layout& l, const TensorPieces& t, const Segments& seg, DataType dtype,
                       ReduceOp op, size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const size_t esize = DataTypeSize(dtype);
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
    // Step 0 sends this rank's inputs; later steps forward what the previous step reduced.
    const bool from_src = s == 0;
    char* pack[2] = {nullptr, nullptr};
    if (from_src && l.Packed(seg.offset[send_idx], slen, true))
      for (int b = 0; b < 2; ++b)
        pack[b] = static_cast<char*>(scratch->Get(2 + b, std::min(slen, chunk) * esize + 1));
    auto post_recv = [&](size_t k) {
      l.PostRecvs(seg.offset[recv_idx] + k * chunk, ChunkLen(rlen, chunk, k), from_src, tmp[k & 1],
                  left, kReduceScatterTag + s, comm, &recvs[k & 1]);
    };
    sends.assign(nsend, {});
    auto post_send = [&](size_t k) {
      if (k >= nsend) return;
      l.PostSends(seg.offset[send_idx] + k * chunk, ChunkLen(slen, chunk, k), from_src, pack[k & 1],
                  right, kReduceScatterTag + s, comm, &sends[k]);
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

// The allgather over the layout's outputs (n > 1 ranks).
void AllgatherOver(const Layout& l, const Segments& seg, MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s, n), recv_idx = RingMod(rank - s - 1, n);
    std::vector<MPI_Request> reqs;
    l.PostRecvs(seg.offset[recv_idx], seg.count[recv_idx], false, nullptr, left, kAllgatherTag + s,
                comm, &reqs);
    l.PostSends(seg.offset[send_idx], seg.count[send_idx], false, nullptr, right, kAllgatherTag + s,
                comm, &reqs);
    Layout::WaitAll(&reqs);
    WatchProgress();
  }
}

int Size(MPI_Comm comm) {
  int n;
  MPI_Comm_size(comm, &n);
  return n;
}

}  // namespace

void RingReduceScatterPieces(const TensorPieces& t, const Segments& seg, DataType dtype,
                             ReduceOp op, size_t chunk_bytes, RingScratch* scratch, MPI_Comm comm) {
  const size_t esize = DataTypeSize(dtype);
  if (Size(comm) == 1) {  // nothing to reduce: the output is the input
    const Layout l(t, esize);
    l.ForEach(0, l.total(), [&](size_t i, size_t in, size_t take) {
      if (t.src[i] != t.dst[i])
        CopyWithProgress(static_cast<char*>(t.dst[i]) + in * esize,
                         static_cast<const char*>(t.src[i]) + in * esize, take * esize);
    });
    return;
  }
  ReduceScatterOver(Layout(t, esize, comm), t, seg, dtype, op, chunk_bytes, scratch, comm);
}

void RingAllgatherPieces(const TensorPieces& t, const Segments& seg, size_t esize, MPI_Comm comm) {
  if (Size(comm) == 1) return;
  AllgatherOver(Layout(t, esize, comm), seg, comm);
}

void RingAllreducePieces(const TensorPieces& t, DataType dtype, ReduceOp op, size_t chunk_bytes,
                         RingScratch* scratch, MPI_Comm comm, const SegmentFn& finish) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const size_t esize = DataTypeSize(dtype);
  size_t total = 0;
  for (size_t c : t.count) total += c;
  if (total == 0) return;
  const Segments seg = EvenSegments(total, n);
  auto finish_segment = [&](const Layout& l) {
    if (finish)
      l.ForEach(seg.offset[rank], seg.count[rank], [&](size_t i, size_t in, size_t take) {
        finish(static_cast<char*>(t.dst[i]) + in * esize, take);
      });
  };
  if (n == 1) {  // the copy to the outputs, where they differ from the inputs
    RingReduceScatterPieces(t, seg, dtype, op, chunk_bytes, scratch, comm);
    finish_segment(Layout(t, esize));
    return;
  }
  const Layout l(t, esize, comm);  // one agreement on the runs for both halves
  ReduceScatterOver(l, t, seg, dtype, op, chunk_bytes, scratch, comm);
  finish_segment(l);
  AllgatherOver(l, seg, comm);
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
