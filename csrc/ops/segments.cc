// Segment arithmetic and memory helpers shared by the collectives.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "common/watch_progress.h"
#include "ops/cpu_collectives.h"

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
    std::abort();  // peers see this rank's end (mpirun or the TCP transport ends the job)
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
  for (void* b : buf_) AlignedFree(b);
}

void* RingScratch::Get(int which, size_t bytes) {
  if (size_[which] < bytes) {
    AlignedFree(buf_[which]);
    buf_[which] = AlignedAlloc(bytes);
    ZeroWithProgress(buf_[which], bytes);  // fault the pages in now, not inside the ring
    size_[which] = bytes;
  }
  return buf_[which];
}

void PrefaultWithProgress(void* p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Page-aligned start: the page holding p is ours in part, and populating does not write.
  uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  while (begin < end) {
    const uintptr_t len = std::min<uintptr_t>(kWatchedPiece, end - begin);
    if (madvise(reinterpret_cast<void*>(begin), len, MADV_POPULATE_WRITE) != 0) return;
    WatchProgress();
    begin += len;
  }
#else
  (void)p;
  (void)bytes;
#endif
}

void SendRecvBytes(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                   int src, int tag, Comm& comm) {
  // Each direction is cut into the same pieces on both ends (the receiver's recv_bytes equals
  // the sender's send_bytes), and every piece is its own message, so the counts always match
  // and byte counts above INT_MAX work. A few pieces are in flight each way: pieces posted all
  // at once share the link and all complete near the end, so a transfer of a GB (seconds
  // into fresh pages) would show the watchdog no progress until it is over; a window keeps
  // the link busy while pieces complete one after another, each telling the watchdog that
  // data moves.
  constexpr size_t kPiece = size_t(16) << 20;
  constexpr int kWindow = 4;
  const size_t nrecv = recv_bytes == 0 ? 1 : (recv_bytes + kPiece - 1) / kPiece;
  const size_t nsend = send_bytes == 0 ? 1 : (send_bytes + kPiece - 1) / kPiece;
  // Slots [0, kWindow) receive, [kWindow, 2 kWindow) send; default (complete) when idle.
  Transfer reqs[2 * kWindow];
  // A transfer may complete as it is posted (a small send the transport buffered, a receive
  // whose message had arrived): a slot is refilled until it holds a pending transfer or nothing
  // is left to post, so every piece is posted exactly once.
  size_t posted_recv = 0, posted_send = 0;
  auto post = [&](int slot) {
    reqs[slot] = Transfer();
    while (!reqs[slot].handle) {
      if (slot < kWindow && posted_recv < nrecv) {
        const size_t off = posted_recv++ * kPiece;
        reqs[slot] = comm.Irecv(static_cast<char*>(recv) + off, std::min(kPiece, recv_bytes - off),
                                src, tag);
      } else if (slot >= kWindow && posted_send < nsend) {
        const size_t off = posted_send++ * kPiece;
        reqs[slot] = comm.Isend(static_cast<const char*>(send) + off,
                                std::min(kPiece, send_bytes - off), dst, tag);
      } else {
        return;
      }
      if (!reqs[slot].handle) WatchProgress();
    }
  };
  for (int slot = 0; slot < 2 * kWindow; ++slot) post(slot);
  // WaitAny returns -1 once every slot is idle: all pieces posted and complete.
  for (int index; (index = comm.WaitAny(2 * kWindow, reqs)) >= 0;) {
    WatchProgress();
    post(index);  // the wait left reqs[index] complete: the next piece takes the slot
  }
}

}  // namespace hvd
