// Tensor fusion: which responses FuseResponses groups, and how a group's tensors are packed
// into and unpacked from the fusion buffer (plain and widened to int64).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/fusion.h"

namespace hvd {
namespace {

Response Allreduce(const std::string& name, int64_t elements, DataType dtype = DataType::FLOAT32) {
  Response r;
  r.type = OpType::ALLREDUCE;
  r.dtype = dtype;
  r.names = {name};
  r.num_elements = {elements};
  return r;
}

using Groups = std::vector<std::vector<std::string>>;

Groups NamesOf(const std::vector<Response>& rs) {
  Groups out;
  for (const auto& r : rs) out.push_back(r.names);
  return out;
}

TEST(FuseResponses, SameKindFusesInOrderUpToTheThresholdInclusive) {
  // float32: 4 bytes per element; 40 + 40 + 20 = 100 fits a threshold of 100 exactly.
  auto out = FuseResponses({Allreduce("a", 10), Allreduce("b", 10), Allreduce("c", 5)}, 100);
  EXPECT_EQ(NamesOf(out), (Groups{{"a", "b", "c"}}));
  EXPECT_EQ(out[0].num_elements, (std::vector<int64_t>{10, 10, 5}));
  EXPECT_EQ(out[0].TotalBytes(), 100);
}

TEST(FuseResponses, NextFitOverflowOpensANewGroupThatLaterTensorsJoin) {
  // a(60) + b(60) > 100: b opens a new group; c(20) fits b's group, not a's (next fit: only the
  // newest group of a kind is open).
  auto out = FuseResponses({Allreduce("a", 15), Allreduce("b", 15), Allreduce("c", 5)}, 100);
  EXPECT_EQ(NamesOf(out), (Groups{{"a"}, {"b", "c"}}));
}

TEST(FuseResponses, ATensorAboveTheThresholdRunsAlone) {
  auto out = FuseResponses({Allreduce("big", 1000), Allreduce("s1", 1), Allreduce("s2", 1)}, 100);
  EXPECT_EQ(NamesOf(out), (Groups{{"big"}, {"s1", "s2"}}));
}

TEST(FuseResponses, DisabledOrTrivialListsPassThrough) {
  EXPECT_EQ(NamesOf(FuseResponses({Allreduce("a", 1), Allreduce("b", 1)}, 0)),
            (Groups{{"a"}, {"b"}}));
  EXPECT_EQ(NamesOf(FuseResponses({Allreduce("a", 1), Allreduce("b", 1)}, -5)),
            (Groups{{"a"}, {"b"}}));
  EXPECT_EQ(NamesOf(FuseResponses({Allreduce("a", 1)}, 100)), (Groups{{"a"}}));
  EXPECT_TRUE(FuseResponses({}, 100).empty());
}

TEST(FuseResponses, OnlyEqualSpecsFuse) {
  std::vector<Response> in;
  in.push_back(Allreduce("f32", 1));
  in.push_back(Allreduce("f64", 1, DataType::FLOAT64));
  in.push_back(Allreduce("max", 1));
  in.back().reduce_op = ReduceOp::MAX;
  in.push_back(Allreduce("pre", 1));
  in.back().prescale = 2.0;
  in.push_back(Allreduce("post", 1));
  in.back().postscale = 0.5;
  in.push_back(Allreduce("gpu", 1));
  in.back().gpu = true;
  in.push_back(Allreduce("f32b", 1));
  in.push_back(Allreduce("f64b", 1, DataType::FLOAT64));
  in.push_back(Allreduce("gpub", 1));
  in.back().gpu = true;
  auto out = FuseResponses(in, 1 << 20);
  // Groups run in the order they were opened.
  EXPECT_EQ(
      NamesOf(out),
      (Groups{{"f32", "f32b"}, {"f64", "f64b"}, {"max"}, {"pre"}, {"post"}, {"gpu", "gpub"}}));
}

TEST(FuseResponses, OtherOpsAndErrorsKeepTheirPlace) {
  std::vector<Response> in;
  in.push_back(Allreduce("a", 1));
  Response gather;
  gather.type = OpType::ALLGATHER;
  gather.names = {"g"};
  gather.num_elements = {1};
  gather.first_dims = {1, 2};
  in.push_back(gather);
  in.push_back(Allreduce("err", 1));
  in.back().error = "Mismatched shapes for tensor 'err'";
  in.push_back(Allreduce("b", 1));
  Response bcast = gather;
  bcast.type = OpType::BROADCAST;
  bcast.names = {"bc"};
  in.push_back(bcast);
  in.push_back(Allreduce("c", 1));
  auto out = FuseResponses(in, 1 << 20);
  EXPECT_EQ(NamesOf(out), (Groups{{"a", "b", "c"}, {"g"}, {"err"}, {"bc"}}));
  EXPECT_EQ(out[1].first_dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(out[2].error, "Mismatched shapes for tensor 'err'");
}

TEST(FuseResponses, TheSameListFusesTheSameWayEveryTime) {
  std::vector<Response> in;
  for (int i = 0; i < 50; ++i)
    in.push_back(Allreduce("t" + std::to_string(i), 1 + (i * 7) % 13,
                           i % 3 ? DataType::FLOAT32 : DataType::INT32));
  EXPECT_EQ(NamesOf(FuseResponses(in, 64)), NamesOf(FuseResponses(in, 64)));
}

TEST(FuseResponses, ReadInPlaceTheCacheFusesAsTheCopiesDoAndLeavesItsInputsAlone) {
  std::vector<Response> in;
  for (int i = 0; i < 40; ++i)
    in.push_back(Allreduce("a/long/name/of/a/gradient/" + std::to_string(i), 1 + (i * 5) % 11,
                           i % 4 ? DataType::FLOAT32 : DataType::FLOAT64));
  in[7].type = OpType::BROADCAST;
  in[12].error = "failed";
  const std::vector<Response> before = in;
  std::vector<const Response*> ptrs;
  for (const auto& r : in) ptrs.push_back(&r);
  for (int64_t threshold : {0, 16, 64, 1 << 20}) {
    const auto by_pointer = FuseCachedResponses(ptrs, threshold);
    const auto by_value = FuseResponses(in, threshold);
    EXPECT_EQ(NamesOf(by_pointer), NamesOf(by_value)) << threshold;
    ASSERT_EQ(by_pointer.size(), by_value.size());
    for (size_t i = 0; i < by_value.size(); ++i) {
      EXPECT_EQ(by_pointer[i].num_elements, by_value[i].num_elements);
      EXPECT_EQ(by_pointer[i].spec(), by_value[i].spec());
      EXPECT_EQ(by_pointer[i].error, by_value[i].error);
    }
  }
  EXPECT_EQ(NamesOf(in), NamesOf(before));  // nothing moved out of the cache's responses
  // Ranks that have joined: every response gets the count of the others, fused or not.
  for (const auto& r : FuseCachedResponses(ptrs, 64, 3)) EXPECT_EQ(r.contributors, 3);
  for (const auto& r : FuseCachedResponses(ptrs, 0, 2)) EXPECT_EQ(r.contributors, 2);
}

// Entries whose inputs and outputs live in `storage`.
struct Tensors {
  std::vector<std::vector<char>> in, out;
  std::vector<TensorEntry> entries;
  std::vector<int64_t> counts;
  Tensors(const std::vector<int64_t>& n, size_t esize) : counts(n) {
    for (size_t i = 0; i < n.size(); ++i) {
      in.emplace_back(n[i] * esize);
      out.emplace_back(n[i] * esize, 0);
      for (size_t b = 0; b < in.back().size(); ++b)
        in.back()[b] = static_cast<char>(17 * i + b + 1);
    }
    entries.resize(n.size());
    for (size_t i = 0; i < n.size(); ++i) {
      entries[i].input = in[i].data();
      entries[i].output = out[i].data();
    }
  }
};

TEST(FusionBuffer, PacksBackToBackAndUnpacksToEachOutput) {
  Tensors t({3, 0, 5, 1}, sizeof(float));
  std::vector<char> buf(9 * sizeof(float), 0x55);
  PackFusionBuffer(t.entries, t.counts, DataType::FLOAT32, false, buf.data());
  EXPECT_EQ(std::vector<char>(buf.begin(), buf.begin() + 12), t.in[0]);
  EXPECT_EQ(std::vector<char>(buf.begin() + 12, buf.begin() + 32), t.in[2]);
  EXPECT_EQ(std::vector<char>(buf.begin() + 32, buf.end()), t.in[3]);
  UnpackFusionBuffer(buf.data(), t.counts, DataType::FLOAT32, false, t.entries);
  for (size_t i = 0; i < t.in.size(); ++i) EXPECT_EQ(t.out[i], t.in[i]) << i;
}

TEST(FusionBuffer, PackingUsesTheDtypeSize) {
  Tensors t({2, 3}, 2);
  std::vector<char> buf(10);
  PackFusionBuffer(t.entries, t.counts, DataType::BFLOAT16, false, buf.data());
  EXPECT_EQ(std::vector<char>(buf.begin() + 4, buf.end()), t.in[1]);
}

TEST(FusionBuffer, WidenedPackingGoesThroughInt64AndBack) {
  const std::vector<int8_t> a = {-128, -1, 0, 127}, b = {5};
  std::vector<int8_t> oa(4, 0), ob(1, 0);
  std::vector<TensorEntry> es(2);
  es[0].input = a.data();
  es[0].output = oa.data();
  es[1].input = b.data();
  es[1].output = ob.data();
  std::vector<int64_t> buf(5, 99);
  PackFusionBuffer(es, {4, 1}, DataType::INT8, true, buf.data());
  EXPECT_EQ(buf, (std::vector<int64_t>{-128, -1, 0, 127, 5}));
  for (auto& v : buf) v = v / 2;  // what an Average over two ranks would leave
  UnpackFusionBuffer(buf.data(), {4, 1}, DataType::INT8, true, es);
  EXPECT_EQ(oa, (std::vector<int8_t>{-64, 0, 0, 63}));
  EXPECT_EQ(ob, (std::vector<int8_t>{2}));
}

TEST(FusionBuffer, WidenedUint8StaysUnsigned) {
  const std::vector<uint8_t> a = {255, 200};
  std::vector<uint8_t> o(2, 0);
  std::vector<TensorEntry> es(1);
  es[0].input = a.data();
  es[0].output = o.data();
  std::vector<int64_t> buf(2);
  PackFusionBuffer(es, {2}, DataType::UINT8, true, buf.data());
  EXPECT_EQ(buf, (std::vector<int64_t>{255, 200}));
  UnpackFusionBuffer(buf.data(), {2}, DataType::UINT8, true, es);
  EXPECT_EQ(o, a);
}

}  // namespace
}  // namespace hvd
