// OutputBlockOffsets (engine.h): where a frontend puts one call's outputs in one block. The
// ring's pieces (16 KiB and up) come first, back to back in order, the small ones after; every
// output starts 64-byte aligned and none overlaps another.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "engine/engine.h"

namespace hvd {
namespace {

constexpr size_t kKiB = 1024;

TEST(OutputBlockOffsets, PiecesFirstInOrderThenSmallOnes) {
  const std::vector<size_t> bytes = {64 * kKiB, 4, 32 * kKiB, 100, 16 * kKiB};
  size_t total = 0;
  const auto at = OutputBlockOffsets(bytes, &total);
  // 64 KiB, 32 KiB and 16 KiB back to back (multiples of 64: no gaps), then 4 and 100.
  EXPECT_EQ(at, (std::vector<size_t>{0, 112 * kKiB, 64 * kKiB, 112 * kKiB + 64, 96 * kKiB}));
  EXPECT_EQ(total, 112 * kKiB + 64 + 128);
}

TEST(OutputBlockOffsets, AlignedAndDisjointWhateverTheSizes) {
  const std::vector<size_t> bytes = {16 * kKiB + 4, 0, 3, 16 * kKiB - 4, 20 * kKiB + 1, 0, 65};
  size_t total = 0;
  const auto at = OutputBlockOffsets(bytes, &total);
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(at[i] % 64, 0u) << "tensor " << i;
    EXPECT_LE(at[i] + bytes[i], total) << "tensor " << i;
    if (bytes[i]) spans.emplace_back(at[i], at[i] + bytes[i]);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  EXPECT_EQ(total % 64, 0u);
}

TEST(OutputBlockOffsets, NoTensorsNoBytes) {
  size_t total = 1;
  EXPECT_TRUE(OutputBlockOffsets({}, &total).empty());
  EXPECT_EQ(total, 0u);
}

}  // namespace
}  // namespace hvd
