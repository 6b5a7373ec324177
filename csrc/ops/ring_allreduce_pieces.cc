// Ring allreduce over several tensors at once without a fusion buffer: the ring of
// ring_allreduce.cc runs over the tensors laid back to back as one virtual buffer, and every
// transfer or reduction that spans tensor boundaries is cut into one piece per tensor.
//   send:   one message per chunk, described by an MPI datatype listing the pieces (MPI packs
//           them on its way, as it copies a contiguous buffer into shared memory or a socket);
//   reduce: the chunk arrives contiguous in scratch and each piece is reduced straight from the
//           tensor's input into its output;
//   gather: one message per segment each way, datatypes on both ends.
// Same steps, bytes and cost as the contiguous ring, minus the two passes over every byte that
// packing the fusion buffer and unpacking it cost (2 B of memcpy for B bytes of gradients, on
// the core that computes).
#include <algorithm>
#include <climits>
#include <vector>

#include "common/reduce_kernels.h"
#include "common/watch_progress.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace hvd {
namespace {

inline int Mod(int a, int n) { return ((a % n) + n) % n; }
inline size_t NumChunks(size_t len, size_t chunk) {
  return len == 0 ? 1 : (len + chunk - 1) / chunk;
}
inline size_t ChunkLen(size_t len, size_t chunk, size_t k) {
  return k * chunk >= len ? 0 : std::min(chunk, len - k * chunk);
}
constexpr int kReduceScatterTag = 400;
constexpr int kAllgatherTag = 500;
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
  // One datatype for [off, off + n) of the inputs (from_src) or the outputs, addressed from
  // MPI_BOTTOM. MPI_DATATYPE_NULL for n == 0 (send 0 bytes of MPI_BYTE instead).
  MPI_Datatype Type(size_t off, size_t n, size_t esize, bool from_src) const {
    if (n == 0) return MPI_DATATYPE_NULL;
    std::vector<int> lens;
    std::vector<MPI_Aint> where;
    ForEach(off, n, [&](size_t i, size_t in, size_t take) {
      const char* base =
          from_src ? static_cast<const char*>(t_.src[i]) : static_cast<const char*>(t_.dst[i]);
      const char* p = base + in * esize;
      for (size_t b = 0; b < take * esize; b += kMaxBlock) {
        MPI_Aint addr;
        MPI_Get_address(p + b, &addr);
        where.push_back(addr);
        lens.push_back(static_cast<int>(std::min(kMaxBlock, take * esize - b)));
      }
    });
    MPI_Datatype type;
    HVD_MPI_CHECK(MPI_Type_create_hindexed(static_cast<int>(lens.size()), lens.data(), where.data(),
                                           MPI_BYTE, &type));
    HVD_MPI_CHECK(MPI_Type_commit(&type));
    return type;
  }

 private:
  const TensorPieces& t_;
  std::vector<size_t> start_;
};

// Posts a send of [off, off + n) (a datatype of its pieces, freed at once: MPI keeps it until
// the send completes).
void PostSend(const Layout& l, size_t off, size_t n, size_t esize, bool from_src, int dst, int tag,
              MPI_Comm comm, MPI_Request* req) {
  MPI_Datatype t = l.Type(off, n, esize, from_src);
  if (t == MPI_DATATYPE_NULL) {
    HVD_MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, dst, tag, comm, req));
    return;
  }
  HVD_MPI_CHECK(MPI_Isend(MPI_BOTTOM, 1, t, dst, tag, comm, req));
  MPI_Type_free(&t);
}

}  // namespace

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
  const int right = Mod(rank + 1, n), left = Mod(rank - 1, n);
  const size_t chunk = std::max<size_t>(1, chunk_bytes / esize);
  std::vector<MPI_Request> sends;
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = Mod(rank - s - 1, n), recv_idx = Mod(rank - s - 2, n);
    const size_t slen = seg.count[send_idx], rlen = seg.count[recv_idx];
    const size_t nsend = NumChunks(slen, chunk), nrecv = NumChunks(rlen, chunk);
    void* tmp[2] = {scratch->Get(0, std::min(rlen, chunk) * esize + 1),
                    scratch->Get(1, std::min(rlen, chunk) * esize + 1)};
    MPI_Request recvs[2];
    auto post_recv = [&](size_t k) {
      HVD_MPI_CHECK(MPI_Irecv(tmp[k & 1], static_cast<int>(ChunkLen(rlen, chunk, k) * esize),
                              MPI_BYTE, left, kReduceScatterTag + s, comm, &recvs[k & 1]));
    };
    sends.assign(nsend, MPI_REQUEST_NULL);
    // Step 0 sends this rank's inputs; later steps forward what the previous step reduced.
    auto post_send = [&](size_t k) {
      if (k >= nsend) return;
      PostSend(l, seg.offset[send_idx] + k * chunk, ChunkLen(slen, chunk, k), esize, s == 0, right,
               kReduceScatterTag + s, comm, &sends[k]);
    };
    auto retire_send = [&](size_t k) {
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
      const char* got = static_cast<const char*>(tmp[k & 1]);
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
  const int right = Mod(rank + 1, n), left = Mod(rank - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = Mod(rank - s, n), recv_idx = Mod(rank - s - 1, n);
    MPI_Request reqs[2];
    PostSend(l, seg.offset[send_idx], seg.count[send_idx], esize, false, right, kAllgatherTag + s,
             comm, &reqs[0]);
    MPI_Datatype rt = l.Type(seg.offset[recv_idx], seg.count[recv_idx], esize, false);
    if (rt == MPI_DATATYPE_NULL) {
      HVD_MPI_CHECK(MPI_Irecv(nullptr, 0, MPI_BYTE, left, kAllgatherTag + s, comm, &reqs[1]));
    } else {
      HVD_MPI_CHECK(MPI_Irecv(MPI_BOTTOM, 1, rt, left, kAllgatherTag + s, comm, &reqs[1]));
      MPI_Type_free(&rt);
    }
    HVD_MPI_CHECK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
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

}  // namespace hvd
