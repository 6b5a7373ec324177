// Segment arithmetic and memory helpers shared by the collectives.
#include <sys/mman.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "common/watch_progress.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace hvd {

Segments EvenSegments(size_t count, int n, size_t granule) {
  Segments s;
  size_t units = granule ? count / granule : 0;
  size_t base = units / n, rem = units % n, off = 0;
  for (int r = 0; r < n; ++r) {
    size_t len = (base + (static_cast<size_t>(r) < rem ? 1 : 0)) * granule;
    s.offset.push_back(off);
    s.count.push_back(len);
    off += len;
  }
  return s;
}

void* DiscardBuffer(std::vector<char>* storage, size_t bytes, const char* what) {
  try {
    storage->resize(bytes + 1);
  } catch (const std::exception&) {
    std::fprintf(stderr,
                 "[horovod] FATAL: cannot allocate %zu bytes for the %s, not even to "
                 "receive and drop it; ending the job\n",
                 bytes, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }
  return storage->data();
}

void* AlignedAlloc(size_t bytes) {
  constexpr size_t kAlign = 2 << 20;  // huge-page aligned
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded ? rounded : kAlign);
  if (p && rounded >= kAlign) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void AlignedFree(void* p) { std::free(p); }

RingScratch::~RingScratch() {
  AlignedFree(buf_[0]);
  AlignedFree(buf_[1]);
}

void* RingScratch::Get(int which, size_t bytes) {
  if (size_[which] < bytes) {
    AlignedFree(buf_[which]);
    buf_[which] = AlignedAlloc(bytes);
    std::memset(buf_[which], 0, bytes);  // fault the pages in now, not inside the ring
    size_[which] = bytes;
  }
  return buf_[which];
}

void SendRecvBytes(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                   int src, int tag, MPI_Comm comm) {
  // Each direction is cut into the same pieces on both ends (the receiver's recv_bytes equals
  // the sender's send_bytes), and every piece is its own message, so the counts always match
  // and byte counts above INT_MAX work. All pieces are posted at once (no pipeline bubbles);
  // each one that completes tells the watchdog that data moves, so a transfer of gigabytes over
  // a slow link is not mistaken for a blocked one.
  constexpr size_t kPiece = size_t(64) << 20;
  std::vector<MPI_Request> reqs;
  size_t r = 0;
  do {
    int n = static_cast<int>(std::min(kPiece, recv_bytes - r));
    reqs.emplace_back();
    HVD_MPI_CHECK(
        MPI_Irecv(static_cast<char*>(recv) + r, n, MPI_BYTE, src, tag, comm, &reqs.back()));
    r += n;
  } while (r < recv_bytes);
  size_t s = 0;
  do {
    int n = static_cast<int>(std::min(kPiece, send_bytes - s));
    reqs.emplace_back();
    HVD_MPI_CHECK(
        MPI_Isend(static_cast<const char*>(send) + s, n, MPI_BYTE, dst, tag, comm, &reqs.back()));
    s += n;
  } while (s < send_bytes);
  if (reqs.size() == 2) {  // the common case: one piece each way
    HVD_MPI_CHECK(MPI_Waitall(2, reqs.data(), MPI_STATUSES_IGNORE));
    WatchProgress();
    return;
  }
  for (size_t left = reqs.size(); left > 0; --left) {
    int index;
    HVD_MPI_CHECK(
        MPI_Waitany(static_cast<int>(reqs.size()), reqs.data(), &index, MPI_STATUS_IGNORE));
    WatchProgress();
  }
}

}  // namespace hvd
