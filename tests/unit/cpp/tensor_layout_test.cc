// The pieces ring's view of a fused response (ops/tensor_layout.h): how a chunk of the virtual
// buffer maps onto the tensors, how the reduce-scatter cuts it into messages (both ends must cut
// alike from the counts alone), and which chunks can be sent without a copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "ops/tensor_layout.h"

namespace hvd {
namespace {

constexpr size_t kOwn = kOwnMessageBytes;  // the ring's floor (128 KiB), in bytes

// Tensors of `counts` float32 elements, each an array of its own.
struct Separate {
  explicit Separate(const std::vector<size_t>& counts) {
    for (size_t c : counts) {
      data.emplace_back(c);
      std::iota(data.back().begin(), data.back().end(), float(1000 * data.size()));
    }
    for (auto& d : data) {
      t.src.push_back(d.data());
      t.dst.push_back(d.data());
    }
    t.count = counts;
  }
  std::vector<std::vector<float>> data;
  TensorPieces t;
};

std::vector<std::pair<size_t, size_t>> Cut(const TensorLayout& l, size_t off, size_t n,
                                           size_t own) {
  std::vector<std::pair<size_t, size_t>> m;
  l.Messages(off, n, own, [&](size_t o, size_t c) { m.emplace_back(o, c); });
  return m;
}

TEST(TensorLayout, MessagesCoverTheChunkInOrderLargePiecesAlone) {
  // Small and large tensors interleaved (bytes: 4 K, 512 K, 40 K, 8 K, 1 M, 124 K, 128 K).
  const std::vector<size_t> counts = {1024, 131072, 10240, 2048, 262144, 31744, 32768};
  Separate s(counts);
  const TensorLayout l(s.t, 4);
  std::vector<size_t> start(1, 0);
  for (size_t c : counts) start.push_back(start.back() + c);
  // Chunks that start and end inside tensors, one the whole buffer.
  for (auto [off, n] : std::vector<std::pair<size_t, size_t>>{
           {0, l.total()}, {500, 140000}, {140000, 200000}, {300000, l.total() - 300000}}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << off << " + " << n);
    const auto m = Cut(l, off, n, kOwn);
    size_t at = off;
    for (auto [o, c] : m) {
      EXPECT_EQ(o, at);
      EXPECT_GT(c, 0u);
      // A message is one piece of a tensor >= the floor, or pieces each below it.
      size_t large = 0, small = 0;
      l.ForEach(o, c, [&](size_t, size_t, size_t take) { ++(take * 4 >= kOwn ? large : small); });
      EXPECT_TRUE((large == 1 && small == 0) || large == 0) << "message " << o << " + " << c;
      at += c;
    }
    EXPECT_EQ(at, off + n);
    // Two runs of small pieces are never neighbours: they would have been one message.
    auto is_run = [&](std::pair<size_t, size_t> msg) {
      bool run = true;
      l.ForEach(msg.first, msg.second, [&](size_t, size_t, size_t take) { run = take * 4 < kOwn; });
      return run;
    };
    for (size_t i = 1; i < m.size(); ++i)
      EXPECT_FALSE(is_run(m[i - 1]) && is_run(m[i])) << "messages " << i - 1 << " and " << i;
  }
  // The whole buffer: [4K] [512K] [40K 8K] [1M] [124K] [128K] (the floor itself is large).
  const auto whole = Cut(l, 0, l.total(), kOwn);
  const std::vector<std::pair<size_t, size_t>> want = {
      {start[0], counts[0]}, {start[1], counts[1]}, {start[2], counts[2] + counts[3]},
      {start[4], counts[4]}, {start[5], counts[5]}, {start[6], counts[6]}};
  EXPECT_EQ(whole, want);
}

TEST(TensorLayout, NoFloorOneMessageEmptyChunkNone) {
  Separate s({1024, 131072, 10240});
  const TensorLayout l(s.t, 4);
  EXPECT_EQ(Cut(l, 100, 50000, 0), (std::vector<std::pair<size_t, size_t>>{{100, 50000}}));
  EXPECT_TRUE(Cut(l, 100, 0, 0).empty());
  EXPECT_TRUE(Cut(l, 100, 0, kOwn).empty());
}

TEST(TensorLayout, ContiguousOnlyWhereTheTensorsTouch) {
  std::vector<float> block(300);
  std::vector<float> apart(100);
  TensorPieces t;
  t.src = {block.data(), block.data() + 100, apart.data()};
  t.dst = {block.data(), block.data() + 100, block.data() + 200};
  t.count = {100, 100, 100};
  const TensorLayout l(t, 4);
  EXPECT_EQ(l.Contiguous(50, 100, true), reinterpret_cast<char*>(block.data() + 50));
  EXPECT_EQ(l.Contiguous(150, 100, true), nullptr);  // the third input lies elsewhere
  EXPECT_EQ(l.Contiguous(150, 100, false), reinterpret_cast<char*>(block.data() + 150));
  EXPECT_EQ(l.Contiguous(210, 50, true), reinterpret_cast<char*>(apart.data() + 10));
}

TEST(TensorLayout, PackThenUnpackRestoresThePieces) {
  Separate s({7, 1, 13, 0, 5});
  const TensorLayout l(s.t, 4);
  std::vector<float> packed(l.total());
  l.Pack(3, 20, true, reinterpret_cast<char*>(packed.data()));
  std::vector<float> want;
  l.ForEach(3, 20, [&](size_t i, size_t in, size_t take) {
    want.insert(want.end(), s.data[i].begin() + in, s.data[i].begin() + in + take);
  });
  EXPECT_EQ(std::vector<float>(packed.begin(), packed.begin() + 20), want);
  for (auto& d : s.data) std::fill(d.begin(), d.end(), -1.0f);
  l.Unpack(3, 20, reinterpret_cast<const char*>(packed.data()));
  std::vector<float> got;
  l.ForEach(3, 20, [&](size_t i, size_t in, size_t take) {
    got.insert(got.end(), s.data[i].begin() + in, s.data[i].begin() + in + take);
  });
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace hvd
