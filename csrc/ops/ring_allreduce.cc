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
// the tensors laid back to back as one virtual buffer, whatever the tensors' addresses. An
// allgather chunk is one message; a reduce-scatter chunk is one message per piece of a tensor
// of at least kOwnMessageBytes and one per run of smaller pieces between them:
//   send:   straight from memory where the message lies back to back in this rank's memory
//           (a large piece always does; small ones where they are one tensor or outputs the
//           bindings allocate as one block), else copied into a chunk-sized scratch buffer;
//   reduce: the chunk arrives in scratch and each tensor's piece of it is reduced straight from
//           the tensor's input into its output;
//   gather: received straight into the outputs where they lie back to back, else into scratch
//           and copied out.
// Message boundaries follow from the counts alone and copies from each rank's own addresses,
// so no rank needs another's layout. Copies: none for chunks inside one tensor or one block of
// outputs; where every tensor is scattered, the small pieces are packed when sent and each chunk
// unpacked once in the allgather, chunk by chunk while in cache. A message per small tensor
// costs ~4 us per 40 KiB tensor on shared memory, more than copying it (100 x 40 KiB: 1.9-2.3x
// one 4000 KiB tensor with a message per tensor, 1.0-1.1x with one per chunk; an MPI datatype
// listing the pieces was 2.6x); above 128 KiB the copy costs more (MobileNetV2's gradients from
// separate arrays: the ring 10-15 % faster at 2 ranks than packing them: docs/benchmarks.md).
#include <algorithm>
#include <vector>

#include "common/reduce_kernels.h"
#include "common/watch_progress.h"
#include "ops/cpu_collectives.h"
#include "ops/ring_steps.h"
#include "ops/tensor_layout.h"

namespace hvd {
namespace {

constexpr int kReduceScatterTag = 100;
constexpr int kAllgatherTag = 200;
// A send or receive of `bytes` at p, in messages of at most kMaxMessageBytes.
void PostSend(const char* p, size_t bytes, int peer, int tag, Comm& comm,
              std::vector<Transfer>* reqs) {
  for (size_t b = 0; b < bytes; b += kMaxMessageBytes)
    reqs->push_back(comm.Isend(p + b, std::min(kMaxMessageBytes, bytes - b), peer, tag));
}

void PostRecv(char* p, size_t bytes, int peer, int tag, Comm& comm, std::vector<Transfer>* reqs) {
  for (size_t b = 0; b < bytes; b += kMaxMessageBytes)
    reqs->push_back(comm.Irecv(p + b, std::min(kMaxMessageBytes, bytes - b), peer, tag));
}

size_t Total(const Segments& seg) {  // the elements the segments cover
  size_t end = 0;
  for (size_t i = 0; i < seg.count.size(); ++i) end = std::max(end, seg.offset[i] + seg.count[i]);
  return end;
}

// Sends chunk [off, off + n) of the inputs (src) or outputs in the messages that
// TensorLayout::Messages cuts it into: each straight from memory where it lies back to back,
// else packed into `pack` at its place in the chunk first.
void SendChunk(const TensorLayout& l, size_t off, size_t n, bool src, size_t own, char* pack,
               size_t esize, int peer, int tag, Comm& comm, std::vector<Transfer>* reqs) {
  l.Messages(off, n, own, [&](size_t moff, size_t mn) {
    char* p = l.Contiguous(moff, mn, src);
    if (!p) {
      p = pack + (moff - off) * esize;
      l.Pack(moff, mn, src, p);
    }
    PostSend(p, mn * esize, peer, tag, comm, reqs);
  });
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
  TensorLayout(t, esize).ForEach(off, n, [&](size_t i, size_t in, size_t take) {
    char* p = static_cast<char*>(t.dst[i]) + in * esize;
    out.src.push_back(p);
    out.dst.push_back(p);
    out.count.push_back(take);
  });
  return out;
}

TensorPieces SliceOfPieces(const TensorPieces& t, size_t off, size_t n, size_t esize) {
  TensorPieces out;
  TensorLayout(t, esize).ForEach(off, n, [&](size_t i, size_t in, size_t take) {
    out.src.push_back(static_cast<const char*>(t.src[i]) + in * esize);
    out.dst.push_back(static_cast<char*>(t.dst[i]) + in * esize);
    out.count.push_back(take);
  });
  return out;
}

void RingReduceScatterPieces(const TensorPieces& t, const Segments& seg, DataType dtype,
                             ReduceOp op, size_t chunk_bytes, RingScratch* scratch, Comm& comm,
                             const SegmentFn& finish) {
  const int rank = comm.rank(), n = comm.size();
  const size_t esize = DataTypeSize(dtype);
  const TensorLayout l(t, esize);
  if (n == 1) {  // nothing to reduce: the output is the input
    l.ForEach(0, l.total(), [&](size_t i, size_t in, size_t take) {
      if (t.src[i] != t.dst[i])
        CopyWithProgress(static_cast<char*>(t.dst[i]) + in * esize,
                         static_cast<const char*>(t.src[i]) + in * esize, take * esize);
      if (finish) finish(static_cast<char*>(t.dst[i]) + in * esize, take);
    });
    return;
  }
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  const size_t chunk = std::max<size_t>(1, chunk_bytes / esize);
  std::vector<std::vector<Transfer>> sends;
  std::vector<Transfer> recvs[2];
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s - 1, n), recv_idx = RingMod(rank - s - 2, n);
    const size_t slen = seg.count[send_idx], rlen = seg.count[recv_idx];
    const size_t nsend = NumChunks(slen, chunk), nrecv = NumChunks(rlen, chunk);
    char* tmp[2] = {static_cast<char*>(scratch->Get(0, std::min(rlen, chunk) * esize + 1)),
                    static_cast<char*>(scratch->Get(1, std::min(rlen, chunk) * esize + 1))};
    // Step 0 sends this rank's inputs; later steps forward what the previous step reduced.
    const bool from_src = s == 0;
    // The last step reduces this rank's own segment: `finish` runs on each chunk of it right
    // after, while the chunk is in cache (a pass over the whole segment afterwards read and
    // wrote it from memory again: a quarter of a 2-rank allreduce's memory traffic).
    const SegmentFn* finish_chunk = s == n - 2 && finish ? &finish : nullptr;
    auto post_recv = [&](size_t k) {
      const size_t off = seg.offset[recv_idx] + k * chunk;
      l.Messages(off, ChunkLen(rlen, chunk, k), kOwnMessageBytes, [&](size_t moff, size_t mn) {
        PostRecv(tmp[k & 1] + (moff - off) * esize, mn * esize, left, kReduceScatterTag + s, comm,
                 &recvs[k & 1]);
      });
    };
    sends.assign(nsend, {});
    auto post_send = [&](size_t k) {
      if (k >= nsend) return;
      char* pack =
          l.pieces() == 1
              ? nullptr
              : static_cast<char*>(scratch->Get(2 + (k & 1), std::min(slen, chunk) * esize + 1));
      SendChunk(l, seg.offset[send_idx] + k * chunk, ChunkLen(slen, chunk, k), from_src,
                kOwnMessageBytes, pack, esize, right, kReduceScatterTag + s, comm, &sends[k]);
    };
    auto retire_send = [&](size_t k) {
      if (k >= nsend) return;
      comm.WaitAll(&sends[k]);
      post_send(k + 2);
    };
    post_recv(0);
    post_send(0);
    post_send(1);
    for (size_t k = 0; k < nrecv; ++k) {
      if (k + 1 < nrecv) post_recv(k + 1);
      comm.WaitAll(&recvs[k & 1]);
      WatchProgress();
      const char* got = tmp[k & 1];
      l.ForEach(seg.offset[recv_idx] + k * chunk, ChunkLen(rlen, chunk, k),
                [&](size_t i, size_t in, size_t take) {
                  char* out = static_cast<char*>(t.dst[i]) + in * esize;
                  ReduceInto(out, static_cast<const char*>(t.src[i]) + in * esize, got, take, dtype,
                             op);
                  if (finish_chunk) (*finish_chunk)(out, take);
                  got += take * esize;
                });
      retire_send(k);
    }
    for (size_t k = nrecv; k < nsend; ++k) retire_send(k);
  }
}

// One tensor moves a segment in messages of at most kMaxGatherMessage, straight from and into
// it; several tensors move it in chunk_bytes chunks, through scratch where they do not lie back
// to back. Every message that lands or leaves is progress for the stall inspector: a segment
// sent as one message (400 MiB: over 1 s through shared memory on a slow 2-core VM) looked
// like a stall to both ranks for as long as it took. 32 MiB messages were still too coarse:
// over TCP both ranks' two messages in flight share one connection, and the first landed only
// after nearly all 64 MiB had moved: 0.22-0.29 s without progress through loopback on a 2-core
// VM, the longest gap of the whole op, and CI's slower VM warned of a healthy job at a 0.5 s
// stall check (reproduced with loopback shaped to 1 Gbit/s: 3 of 3 launches warned; 8 MiB: 0 of
// 2). Smaller messages cost a shaped 400 Mbit/s link a little (2 x 1, 64 MiB allreduces, time
// against 32 MiB: 4 MiB +7 % on a slow VM, +3-4 % on a faster one; 8 MiB under 2 %), why not
// measured. 8 MiB: 168 ms per message at 400 Mbit/s (docs/benchmarks.md).
constexpr size_t kMaxGatherMessage = size_t(8) << 20;

void RingAllgatherPieces(const TensorPieces& t, const Segments& seg, size_t esize,
                         size_t chunk_bytes, RingScratch* scratch, Comm& comm) {
  const int rank = comm.rank(), n = comm.size();
  if (n == 1) return;
  const TensorLayout l(t, esize);
  const int right = RingMod(rank + 1, n), left = RingMod(rank - 1, n);
  const size_t chunk = std::max<size_t>(
      1, l.pieces() == 1 ? std::min(l.total(), kMaxGatherMessage / esize) : chunk_bytes / esize);
  std::vector<std::vector<Transfer>> sends;
  std::vector<Transfer> recvs[2];
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = RingMod(rank - s, n), recv_idx = RingMod(rank - s - 1, n);
    const size_t slen = seg.count[send_idx], rlen = seg.count[recv_idx];
    const size_t nsend = NumChunks(slen, chunk), nrecv = NumChunks(rlen, chunk);
    auto buffer = [&](int which, size_t len) {  // only where a chunk is not back to back
      return static_cast<char*>(scratch->Get(which, std::min(len, chunk) * esize + 1));
    };
    char* landed[2] = {nullptr, nullptr};  // where chunk k went: scratch, or null (the outputs)
    auto post_recv = [&](size_t k) {
      if (k >= nrecv) return;
      const size_t off = seg.offset[recv_idx] + k * chunk, len = ChunkLen(rlen, chunk, k);
      landed[k & 1] = nullptr;
      if (len == 0) return;  // nothing posted, on both ends
      char* p = l.Contiguous(off, len, false);
      landed[k & 1] = p ? nullptr : buffer(k & 1, rlen);
      PostRecv(p ? p : landed[k & 1], len * esize, left, kAllgatherTag + s, comm, &recvs[k & 1]);
    };
    sends.assign(nsend, {});
    auto post_send = [&](size_t k) {
      if (k >= nsend) return;
      SendChunk(l, seg.offset[send_idx] + k * chunk, ChunkLen(slen, chunk, k), false, 0,
                l.pieces() == 1 ? nullptr : buffer(2 + (k & 1), slen), esize, right,
                kAllgatherTag + s, comm, &sends[k]);
    };
    post_recv(0);
    post_recv(1);
    post_send(0);
    post_send(1);
    for (size_t k = 0; k < std::max(nrecv, nsend); ++k) {
      if (k < nrecv) {
        comm.WaitAll(&recvs[k & 1]);
        WatchProgress();
        if (landed[k & 1])
          l.Unpack(seg.offset[recv_idx] + k * chunk, ChunkLen(rlen, chunk, k), landed[k & 1]);
        post_recv(k + 2);
      }
      if (k < nsend) {
        comm.WaitAll(&sends[k]);
        WatchProgress();
        post_send(k + 2);
      }
    }
  }
}

void RingAllreducePieces(const TensorPieces& t, DataType dtype, ReduceOp op, size_t chunk_bytes,
                         RingScratch* scratch, Comm& comm, const SegmentFn& finish) {
  const int n = comm.size();
  const size_t esize = DataTypeSize(dtype);
  const TensorLayout l(t, esize);
  if (l.total() == 0) return;
  const Segments seg = EvenSegments(l.total(), n);
  RingReduceScatterPieces(t, seg, dtype, op, chunk_bytes, scratch, comm, finish);
  RingAllgatherPieces(t, seg, esize, chunk_bytes, scratch, comm);
}

void RingReduceScatter(const void* src, void* dst, DataType dtype, ReduceOp op, const Segments& seg,
                       size_t chunk_bytes, RingScratch* scratch, Comm& comm) {
  RingReduceScatterPieces(OneTensor(src, dst, Total(seg)), seg, dtype, op, chunk_bytes, scratch,
                          comm);
}

void RingAllgather(void* buf, size_t esize, const Segments& seg, Comm& comm) {
  // One tensor: a segment per message, never through scratch.
  RingAllgatherPieces(OneTensor(buf, buf, Total(seg)), seg, esize, 0, nullptr, comm);
}

void RingAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                   size_t chunk_bytes, RingScratch* scratch, Comm& comm, const SegmentFn& finish) {
  RingAllreducePieces(OneTensor(src, dst, count), dtype, op, chunk_bytes, scratch, comm, finish);
}

}  // namespace hvd
