// Step arithmetic the ring collectives share (internal to csrc/ops).
#pragma once

#include <algorithm>
#include <cstddef>

namespace hvd {

// a mod n in [0, n), for ring neighbours and segment indices (a may be negative).
inline int RingMod(int a, int n) { return ((a % n) + n) % n; }
// Chunks a segment of `len` elements travels in (one, empty, for an empty segment).
inline size_t NumChunks(size_t len, size_t chunk) {
  return len == 0 ? 1 : (len + chunk - 1) / chunk;
}
// Elements of chunk k of a segment of `len` (0 past its end).
inline size_t ChunkLen(size_t len, size_t chunk, size_t k) {
  return k * chunk >= len ? 0 : std::min(chunk, len - k * chunk);
}

}  // namespace hvd
