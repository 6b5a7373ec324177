// Ring segmenting (ops/segments.cc): how EvenSegments cuts a buffer into one segment per rank,
// for the ring allreduce (granule 1) and reducescatter (granule = elements per row).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>

#include "ops/cpu_collectives.h"

namespace hvd {
namespace {

// Contiguous, in rank order, covering [0, count), sizes multiples of granule differing by at
// most one granule, the larger ones first.
void ExpectEven(size_t count, int n, size_t granule) {
  SCOPED_TRACE(::testing::Message() << "count " << count << ", n " << n << ", granule " << granule);
  const Segments s = EvenSegments(count, n, granule);
  ASSERT_EQ(s.offset.size(), static_cast<size_t>(n));
  ASSERT_EQ(s.count.size(), static_cast<size_t>(n));
  size_t next = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(s.offset[r], next) << "rank " << r;
    EXPECT_EQ(s.count[r] % granule, 0u) << "rank " << r;
    if (r > 0) { EXPECT_LE(s.count[r], s.count[r - 1]) << "rank " << r; }
    next += s.count[r];
  }
  EXPECT_EQ(next, count);
  const auto [lo, hi] = std::minmax_element(s.count.begin(), s.count.end());
  EXPECT_LE(*hi - *lo, granule);
}

TEST(EvenSegments, CoverTheBufferEvenly) {
  for (int n : {1, 2, 3, 4, 7, 64})
    for (size_t count : {0, 1, 2, 5, 63, 64, 65, 1000, 1 << 20}) ExpectEven(count, n, 1);
}

TEST(EvenSegments, RowsStayWhole) {
  // Reducescatter: count = rows * row elements.
  for (int n : {1, 2, 3, 5})
    for (size_t rows : {0, 1, 2, 4, 7, 11})
      for (size_t row : {1, 3, 16}) ExpectEven(rows * row, n, row);
}

TEST(EvenSegments, ExactValues) {
  const Segments s = EvenSegments(10, 3);
  EXPECT_EQ(s.count, (std::vector<size_t>{4, 3, 3}));
  EXPECT_EQ(s.offset, (std::vector<size_t>{0, 4, 7}));
  // 7 rows of 2 over 3 ranks: 3, 2, 2 rows.
  const Segments rows = EvenSegments(14, 3, 2);
  EXPECT_EQ(rows.count, (std::vector<size_t>{6, 4, 4}));
  EXPECT_EQ(rows.offset, (std::vector<size_t>{0, 6, 10}));
}

TEST(EvenSegments, FewerElementsThanRanksLeaveTheLastRanksEmpty) {
  const Segments s = EvenSegments(2, 4);
  EXPECT_EQ(s.count, (std::vector<size_t>{1, 1, 0, 0}));
  EXPECT_EQ(s.offset, (std::vector<size_t>{0, 1, 2, 2}));
}

TEST(EvenSegments, RowsOfZeroElementsGiveEmptySegments) {
  // A reducescatter of shape [4, 0]: no elements to move (the rows are counted elsewhere).
  const Segments s = EvenSegments(0, 3, 0);
  EXPECT_EQ(s.count, (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(s.offset, (std::vector<size_t>{0, 0, 0}));
}

}  // namespace
}  // namespace hvd
