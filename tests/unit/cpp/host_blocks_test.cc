// Host blocks (common/host_blocks.h): what a frontend's outputs are allocated from. A block
// given back is taken again by the next call that fits, never by a call of under half its
// size; large ones are 2 MiB aligned (huge pages); the kept bytes stay bounded.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/host_blocks.h"

namespace hvd {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * kKiB;

// Every test starts from no kept blocks: a request of s takes a kept block of s to 2s bytes,
// so powers of two take them all (a request nothing fits allocates anew: freed at once).
void Drain() {
  for (size_t s = 1; s <= (size_t(512) << 20); s *= 2)
    for (size_t before = KeptHostBytes() + 1; KeptHostBytes() < before;) {
      before = KeptHostBytes();
      std::free(TakeHostBlock(s).data);
    }
  ASSERT_EQ(KeptHostBytes(), 0u);
}

TEST(HostBlocks, GivenBackThenTakenAgain) {
  Drain();
  HostBlock a = TakeHostBlock(100 * kKiB);
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 64, 0u);
  KeepHostBlock(a);
  EXPECT_EQ(KeptHostBytes(), 100 * kKiB);
  HostBlock b = TakeHostBlock(90 * kKiB);  // fits, and not over twice the size
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(b.bytes, 100 * kKiB);
  EXPECT_EQ(KeptHostBytes(), 0u);
  KeepHostBlock(b);
  HostBlock small = TakeHostBlock(40 * kKiB);  // under half: a new block, the large one kept
  EXPECT_NE(small.data, a.data);
  EXPECT_EQ(KeptHostBytes(), 100 * kKiB);
  KeepHostBlock(small);
  Drain();
}

TEST(HostBlocks, SmallestThatFits) {
  Drain();
  HostBlock big = TakeHostBlock(200 * kKiB), mid = TakeHostBlock(120 * kKiB);
  KeepHostBlock(big);
  KeepHostBlock(mid);
  HostBlock got = TakeHostBlock(110 * kKiB);
  EXPECT_EQ(got.data, mid.data);
  KeepHostBlock(got);
  Drain();
}

TEST(HostBlocks, LargeOnesAreHugePageAligned) {
  Drain();
  HostBlock b = TakeHostBlock(13 * kMiB + 5);
  ASSERT_NE(b.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % (2 * kMiB), 0u);
  // The whole block is usable.
  static_cast<char*>(b.data)[b.bytes - 1] = 1;
  KeepHostBlock(b);
  Drain();
}

TEST(HostBlocks, KeptBytesBounded) {
  Drain();
  std::vector<HostBlock> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(TakeHostBlock(64 * kMiB));
  for (auto& b : blocks) KeepHostBlock(b);
  EXPECT_LE(KeptHostBytes(), size_t(256) << 20);
  HostBlock huge = TakeHostBlock(300 * kMiB);  // over the bound: freed, not kept
  const size_t before = KeptHostBytes();
  KeepHostBlock(huge);
  EXPECT_EQ(KeptHostBytes(), before);
  Drain();
}

}  // namespace
}  // namespace hvd
