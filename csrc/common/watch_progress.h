// The progress beat of the engine's watchdog (engine/watchdog.h): collectives call
// WatchProgress() whenever a piece of data has moved or a piece of local work is done, and the
// watchdog's thread reads the count to tell a long section that still progresses from a blocked
// one. Large local copies go through CopyWithProgress/ZeroWithProgress, which beat per piece:
// copying 1 GB into fresh pages takes seconds, during which the peers wait on this rank.
// It lives here, below ops/, because the collectives in ops/ must not include engine/ (includes
// only point down the layers). A counter is all they need; the watched sections, which name an
// op and its tensors, and the watchdog thread belong to the engine that runs those ops.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hvd {

// The process's count of pieces moved (one engine per process).
std::atomic<uint64_t>& WatchProgressCount();

inline void WatchProgress() { WatchProgressCount().fetch_add(1, std::memory_order_relaxed); }

// 16 MiB: tens of milliseconds even when every page faults, far below any stall check time.
constexpr size_t kWatchedPiece = size_t(16) << 20;

inline void CopyWithProgress(void* dst, const void* src, size_t bytes) {
  for (size_t off = 0; off < bytes; off += kWatchedPiece) {
    std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off,
                std::min(kWatchedPiece, bytes - off));
    WatchProgress();
  }
}

inline void ZeroWithProgress(void* dst, size_t bytes) {
  for (size_t off = 0; off < bytes; off += kWatchedPiece) {
    std::memset(static_cast<char*>(dst) + off, 0, std::min(kWatchedPiece, bytes - off));
    WatchProgress();
  }
}

}  // namespace hvd
