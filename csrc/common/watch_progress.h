// The progress beat of the engine's watchdog (engine/watchdog.h): collectives call
// WatchProgress() whenever a piece of data has moved, and the watchdog's thread reads the count
// to tell a long section that still moves data from a blocked one.
// It lives here, below ops/, because the collectives in ops/ must not include engine/ (includes
// only point down the layers). A counter is all they need; the watched sections, which name an
// op and its tensors, and the watchdog thread belong to the engine that runs those ops.
#pragma once

#include <atomic>
#include <cstdint>

namespace hvd {

// The process's count of pieces moved (one engine per process).
std::atomic<uint64_t>& WatchProgressCount();

inline void WatchProgress() { WatchProgressCount().fetch_add(1, std::memory_order_relaxed); }

}  // namespace hvd
