// The CPU collectives, one file each, each opening with its algorithm and cost. All run on the
// background thread over a communicator of the transport (transport/transport.h); buffers are
// host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/common.h"
#include "transport/transport.h"

namespace hvd {

// Element ranges of a buffer, one per rank: segment r is [offset[r], offset[r] + count[r]).
struct Segments {
  std::vector<size_t> offset, count;
};
// Splits `count` elements into n contiguous segments whose sizes are multiples of `granule`
// (a row of a reducescatter) and differ by at most one granule, the first ones larger.
Segments EvenSegments(size_t count, int n, size_t granule = 1);

// Chunk-sized buffers the ring alternates between (0 and 1: receives; 2 and 3: packed sends);
// persistent and huge-page advised so that steady-state steps never page-fault.
class RingScratch {
 public:
  static constexpr int kBuffers = 4;
  ~RingScratch();
  void* Get(int which, size_t bytes);

 private:
  void* buf_[kBuffers] = {};
  size_t size_[kBuffers] = {};
};

// Where a rank whose output allocation failed still receives, so that its peers never block.
// If even that memory is missing the job cannot go on: the process ends naming `what` and the
// size (a failed transfer cannot be unwound).
void* DiscardBuffer(std::vector<char>* storage, size_t bytes, const char* what);

// Persistent, huge-page advised host memory that grows on demand and is never shrunk.
void* AlignedAlloc(size_t bytes);
void AlignedFree(void* p);

// Faults in the pages of [p, p + bytes) for writing (MADV_POPULATE_WRITE; a no-op where the kernel
// lacks it), in pieces that each count as progress. Receiving into fresh pages faults them inside
// MPI, where the watchdog sees nothing for as long as it takes; this is the same work, outside.
void PrefaultWithProgress(void* p, size_t bytes);

// Blocking exchange with both peers, split into pieces so that byte counts above INT_MAX work.
void SendRecvBytes(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                   int src, int tag, Comm& comm);

// ring_allreduce.cc
// src may equal dst (in place). After the reduce-scatter rank r holds reduced segment r of dst.
void RingReduceScatter(const void* src, void* dst, DataType dtype, ReduceOp op, const Segments& seg,
                       size_t chunk_bytes, RingScratch* scratch, Comm& comm);
void RingAllgather(void* buf, size_t elem_size, const Segments& seg, Comm& comm);
// `finish(ptr, count)` runs on this rank's fully reduced segment before the allgather spreads
// it: scaling there (Average, postscale) costs each rank 1/n of the buffer instead of all of it.
using SegmentFn = std::function<void(void* data, size_t count)>;
void RingAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                   size_t chunk_bytes, RingScratch* scratch, Comm& comm,
                   const SegmentFn& finish = nullptr);
// The same ring over several tensors laid back to back, without a fusion buffer (the three
// above are its one-tensor case). Tensor i is count[i] elements read from src[i] and written
// to dst[i] (src may equal dst); `finish` runs on each piece of this rank's reduced segment.
struct TensorPieces {
  std::vector<const void*> src;
  std::vector<void*> dst;
  std::vector<size_t> count;
};
void RingAllreducePieces(const TensorPieces& tensors, DataType dtype, ReduceOp op,
                         size_t chunk_bytes, RingScratch* scratch, Comm& comm,
                         const SegmentFn& finish = nullptr);
// Its halves, as RingReduceScatter / RingAllgather over the virtual buffer (the allgather reads
// and writes the outputs only), and a view of [off, off + n) of the outputs, in place. The
// reduce-scatter runs `finish` on each chunk of this rank's segment as soon as it is reduced.
void RingReduceScatterPieces(const TensorPieces& tensors, const Segments& seg, DataType dtype,
                             ReduceOp op, size_t chunk_bytes, RingScratch* scratch, Comm& comm,
                             const SegmentFn& finish = nullptr);
void RingAllgatherPieces(const TensorPieces& tensors, const Segments& seg, size_t elem_size,
                         size_t chunk_bytes, RingScratch* scratch, Comm& comm);
TensorPieces SliceOfOutputs(const TensorPieces& tensors, size_t off, size_t n, size_t elem_size);
// [off, off + n) of the inputs and the outputs alike.
TensorPieces SliceOfPieces(const TensorPieces& tensors, size_t off, size_t n, size_t elem_size);
TensorPieces OneTensor(const void* src, void* dst, size_t count);
// hierarchical.cc: the same results as RingAllreduce / Allgather over the communicator whose
// ranks `local` (this host's) and `cross` (this local rank's, one per host) split; every host
// holds the same number of ranks.
void HierarchicalAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                           size_t chunk_bytes, RingScratch* scratch, Comm& local, Comm& cross,
                           const SegmentFn& finish = nullptr);
// The same over several tensors without a fusion buffer (the pieces rings' halves).
void HierarchicalAllreducePieces(const TensorPieces& tensors, DataType dtype, ReduceOp op,
                                 size_t chunk_bytes, RingScratch* scratch, Comm& local, Comm& cross,
                                 const SegmentFn& finish = nullptr);
// Where every rank of the whole communicator sits (the Transport's topology fields).
struct HostLayout {
  int rank = 0, num_hosts = 1;
  std::vector<int> host_of, local_rank_of;  // per rank of the whole communicator
  std::vector<int> cross_members;           // the whole communicator's ranks of `cross`, in order
};
void HierarchicalAllgather(const void* in, void* out, size_t row_bytes,
                           const std::vector<int64_t>& first_dims, const HostLayout& layout,
                           Comm& local, Comm& cross);
// allreduce_small.cc: one-step exchange for small buffers (bytes * n must fit an int).
void DirectAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                     RingScratch* scratch, Comm& comm);
// adasum.cc: Adasum (op=hvd.Adasum) of every rank's `buf`, in place: the tensors of `counts`
// back to back, each combined as a vector of its own; a floating dtype; a power-of-two number
// of ranks (both checked at negotiation, UnsupportedReduction).
void AdasumAllreduce(void* buf, const std::vector<int64_t>& counts, DataType dtype,
                     RingScratch* scratch, Comm& comm);
// Its parts, apart from any transport so that a unit test can run the schedule on threads.
// Sends `send_bytes` to `peer` and receives `recv_bytes` from it (both must call it).
using PeerExchange = std::function<void(int peer, const void* send, size_t send_bytes, void* recv,
                                        size_t recv_bytes)>;
// The schedule on rank `rank` of `size` (a power of two); `scratch` holds half the buffer
// rounded up.
void AdasumVhdd(void* buf, const std::vector<int64_t>& counts, DataType dtype, int rank, int size,
                void* scratch, const PeerExchange& exchange);
struct AdasumDots {
  double ab = 0, aa = 0, bb = 0;  // a.b, |a|^2, |b|^2
};
AdasumDots AdasumDot(const void* a, const void* b, size_t count, DataType dtype);
// adasum(a, b) = ca a + cb b; a coefficient is 1 where its vector is (numerically) zero.
void AdasumCoefficients(const AdasumDots& d, double* ca, double* cb);
// a[i] = ca a[i] + cb b[i], in double.
void AdasumScaledAdd(void* a, double ca, const void* b, double cb, size_t count, DataType dtype);
// allgather.cc: `out` holds sum(first_dims) rows of `row_bytes`.
void Allgather(const void* in, void* out, size_t row_bytes, const std::vector<int64_t>& first_dims,
               Comm& comm);
// reducescatter.cc: reduces `src` (count elements) through `work` (count elements of scratch,
// may equal src) and copies this rank's rows to out.
void Reducescatter(const void* src, void* work, size_t count, size_t row_elems, DataType dtype,
                   ReduceOp op, size_t chunk_bytes, RingScratch* scratch, Comm& comm, void* out);
// broadcast.cc
void Broadcast(void* buf, size_t bytes, int root, Comm& comm);
// alltoall.cc: exchanges row counts, then the rows. `recv_rows` receives each sender's count.
// `alloc` gets the total row count and returns the output buffer; if it returns null the rows
// are still received (into scratch, so that no peer blocks) and false is returned.
bool Alltoall(const void* in, size_t row_bytes, const std::vector<int64_t>& send_rows,
              std::vector<int64_t>* recv_rows, const std::function<void*(int64_t)>& alloc,
              Comm& comm);

}  // namespace hvd
