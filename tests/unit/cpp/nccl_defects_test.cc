// The known-defects table and the reduction plan of the GPU path (common/nccl_defects.h), behind
// fake NCCL versions: which versions are in which defect's range, that a one-rank communicator
// never reaches NCCL's reductions on any version, that a defective ncclAvg or pre-multiplied
// sum is never chosen, and that every plan computes what the CPU path computes (simulated here
// with the CPU kernels: NCCL's reductions as NCCL defines them, our kernel as ScaleInPlace and
// ScaleAndAverage, which the device kernels mirror).
#include "common/nccl_defects.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/reduce_kernels.h"

namespace hvd {
namespace {

constexpr int k2_18_1 = 21801, k2_19_1 = 21901, k2_27_5 = 22705, k2_28_9 = 22809, k2_29_7 = 22907,
              k2_32_3 = 23203;
const int kVersions[] = {0,       21003,   21104,   21403, k2_18_1, 21803,
                         k2_19_1, k2_27_5, k2_28_9, 22906, k2_29_7, k2_32_3};
const ReduceOp kOps[] = {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MIN, ReduceOp::MAX,
                         ReduceOp::PRODUCT};
const DataType kTypes[] = {DataType::UINT8,   DataType::INT8,    DataType::INT32,
                           DataType::INT64,   DataType::FLOAT16, DataType::BFLOAT16,
                           DataType::FLOAT32, DataType::FLOAT64};

TEST(NcclDefects, VersionNames) {
  EXPECT_EQ(NcclVersionName(k2_27_5), "2.27.5");
  EXPECT_EQ(NcclVersionName(k2_32_3), "2.32.3");
  EXPECT_EQ(NcclVersionName(21003), "2.10.3");
  EXPECT_EQ(NcclVersionName(2708), "2.7.8");  // before 2.9: one digit for the minor version
  EXPECT_EQ(NcclVersionName(0), "");
}

TEST(NcclDefects, OneRankPreMulSumTailFrom2_19_1To2_29_7) {
  for (int v : {k2_19_1, 22005, k2_27_5, k2_28_9, 22906})
    EXPECT_TRUE(NcclBrokenFor(v, 1, NcclBroken::kPreMulSum)) << v;
  for (int v : {0, k2_18_1, 21806, k2_29_7, 23004, k2_32_3})
    EXPECT_FALSE(NcclBrokenFor(v, 1, NcclBroken::kPreMulSum)) << v;
  // Only one-rank communicators: NCCL's kernel for more ranks partitions correctly.
  EXPECT_FALSE(NcclBrokenFor(k2_27_5, 2, NcclBroken::kPreMulSum));
  const std::vector<std::string> notes = NcclDefectNotes(k2_27_5);
  ASSERT_EQ(notes.size(), 1u);
  for (const char* want : {"NCCL 2.27.5", "2.19.1 <= version < 2.29.7", "NVIDIA/nccl#1950",
                           "one-rank", "never call NCCL"})
    EXPECT_NE(notes[0].find(want), std::string::npos) << want << " in " << notes[0];
  EXPECT_TRUE(NcclDefectNotes(k2_32_3).empty());
  EXPECT_TRUE(NcclDefectNotes(0).empty());  // no NCCL loaded
}

TEST(NcclDefects, CollNetChainIntegerAverageFrom2_14_3To2_18_3) {
  EXPECT_TRUE(NcclBrokenFor(k2_18_1, 8, NcclBroken::kIntegerAverage));
  EXPECT_TRUE(NcclBrokenFor(21403, 2, NcclBroken::kIntegerAverage));
  EXPECT_FALSE(NcclBrokenFor(21803, 8, NcclBroken::kIntegerAverage));
  EXPECT_FALSE(NcclBrokenFor(21304, 8, NcclBroken::kIntegerAverage));
  EXPECT_FALSE(NcclBrokenFor(k2_18_1, 8, NcclBroken::kPreMulSum));
  const std::vector<std::string> notes = NcclDefectNotes(k2_18_1);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("CollNet/Chain"), std::string::npos) << notes[0];
}

TEST(NcclDefects, EveryEntryHasARangeAndASource) {
  for (int v = 20000; v < 24000; ++v)
    for (const NcclDefect& d : NcclDefects(v)) {
      EXPECT_LT(d.first, d.fixed);
      EXPECT_TRUE(d.what && *d.what && d.avoid && *d.avoid && d.source && *d.source);
    }
}

TEST(ReducePlan, OneRankNeverCallsNcclOnAnyVersion) {
  for (int v : kVersions)
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (double pre : {1.0, 0.5})
          for (double post : {1.0, 3.0}) {
            const ReducePlan p = PlanReduction(v, 1, t, op, pre, post, 1);
            EXPECT_FALSE(p.nccl) << v << " " << DataTypeName(t) << " " << ReduceOpName(op);
            EXPECT_EQ(p.pre, pre);
            EXPECT_EQ(p.post, post);
            EXPECT_EQ(p.divisor, 1);
          }
  // Average at one rank, no factors: a copy (nothing at all in place).
  EXPECT_FALSE(
      PlanReduction(k2_27_5, 1, DataType::FLOAT32, ReduceOp::AVERAGE, 1, 1, 1).OwnScaling());
}

// Every loaded version of the table, and every combination of what could be broken (paths no
// entry of today's table takes: a pre-multiplied sum broken on several ranks).
std::vector<NcclBrokenSet> BrokenSets(int ranks) {
  std::vector<NcclBrokenSet> out;
  for (int v : kVersions) {
    NcclBrokenSet b;
    b.premul_sum = NcclBrokenFor(v, ranks, NcclBroken::kPreMulSum);
    b.integer_average = NcclBrokenFor(v, ranks, NcclBroken::kIntegerAverage);
    out.push_back(b);
  }
  for (bool premul : {false, true})
    for (bool integer : {false, true}) out.push_back(NcclBrokenSet{premul, integer});
  return out;
}

TEST(ReducePlan, NeverChoosesWhatTheLoadedNcclBreaks) {
  for (int ranks : {2, 3, 8})
    for (const NcclBrokenSet& broken : BrokenSets(ranks))
      for (DataType t : kTypes)
        for (ReduceOp op : kOps)
          for (double pre : {1.0, 0.5})
            for (double post : {1.0, 3.0}) {
              const ReducePlan p = PlanReduction(broken, ranks, t, op, pre, post, ranks);
              ASSERT_TRUE(p.nccl);
              const bool premul =
                  p.nccl_scale != 1.0 || (p.op == ReduceOp::AVERAGE && IsFloating(t));
              if (broken.premul_sum) { EXPECT_FALSE(premul); }
              if (broken.integer_average) {
                EXPECT_FALSE(p.op == ReduceOp::AVERAGE && !IsFloating(t));
              }
              // NCCL scales only sums of floating types; integers never get a scalar.
              if (p.nccl_scale != 1.0) { EXPECT_TRUE(IsFloating(t) && p.op == ReduceOp::SUM); }
            }
  // The version overload reads the table: 2.18.1's integer Average is a sum and our division.
  EXPECT_EQ(PlanReduction(k2_18_1, 4, DataType::INT32, ReduceOp::AVERAGE, 1, 1, 4).op,
            ReduceOp::SUM);
}

TEST(ReducePlan, NcclDoesTheScalingWhereItCan) {
  ReducePlan p = PlanReduction(k2_32_3, 4, DataType::FLOAT32, ReduceOp::AVERAGE, 1, 1, 4);
  EXPECT_EQ(p.op, ReduceOp::AVERAGE);
  EXPECT_FALSE(p.OwnScaling());
  p = PlanReduction(k2_27_5, 4, DataType::BFLOAT16, ReduceOp::AVERAGE, 0.5, 1, 4);
  EXPECT_EQ(p.op, ReduceOp::SUM);
  EXPECT_DOUBLE_EQ(p.nccl_scale, 0.125);
  EXPECT_FALSE(p.OwnScaling());
  // Average by the contributors of a join: not ncclAvg, which divides by the communicator.
  p = PlanReduction(k2_32_3, 4, DataType::FLOAT32, ReduceOp::AVERAGE, 1, 1, 3);
  EXPECT_EQ(p.op, ReduceOp::SUM);
  EXPECT_DOUBLE_EQ(p.nccl_scale, 1.0 / 3);
  p = PlanReduction(k2_32_3, 4, DataType::INT32, ReduceOp::AVERAGE, 1, 1, 4);
  EXPECT_EQ(p.op, ReduceOp::AVERAGE);
  EXPECT_FALSE(p.OwnScaling());
}

TEST(ReducePlan, OurKernelWhereNcclCannot) {
  // Integers with factors: each share truncated, as upstream and the CPU path.
  ReducePlan p = PlanReduction(k2_32_3, 4, DataType::INT32, ReduceOp::AVERAGE, 0.5, 3, 4);
  EXPECT_EQ(p.op, ReduceOp::SUM);
  EXPECT_EQ(p.pre, 0.5);
  EXPECT_EQ(p.post, 3.0);
  EXPECT_EQ(p.divisor, 4);
  // The CollNet/Chain defect: integer Average as a sum and our division.
  p = PlanReduction(k2_18_1, 4, DataType::INT64, ReduceOp::AVERAGE, 1, 1, 4);
  EXPECT_EQ(p.op, ReduceOp::SUM);
  EXPECT_EQ(p.divisor, 4);
  // Min/Max/Product: NCCL's op, factors around it.
  p = PlanReduction(k2_32_3, 4, DataType::FLOAT16, ReduceOp::MAX, 2, 1, 4);
  EXPECT_EQ(p.op, ReduceOp::MAX);
  EXPECT_EQ(p.pre, 2.0);
  EXPECT_EQ(p.nccl_scale, 1.0);
}

// ---- every plan against the CPU path's arithmetic --------------------------------------------

std::vector<char> Bytes(const std::vector<double>& v, DataType t) {
  std::vector<char> out(v.size() * DataTypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::FLOAT32) {
      const float f = static_cast<float>(v[i]);
      std::memcpy(out.data() + 4 * i, &f, 4);
    } else {
      const int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(out.data() + 4 * i, &x, 4);
    }
  }
  return out;
}

double At(const std::vector<char>& b, DataType t, size_t i) {
  if (t == DataType::FLOAT32) {
    float f;
    std::memcpy(&f, b.data() + 4 * i, 4);
    return f;
  }
  int32_t x;
  std::memcpy(&x, b.data() + 4 * i, 4);
  return x;
}

// The CPU path: prescale each share, reduce, then ScaleAndAverage(postscale, average_by).
std::vector<char> CpuPath(const std::vector<std::vector<char>>& ranks, DataType t, ReduceOp op,
                          double pre, double post, int average_by, size_t n) {
  std::vector<char> acc;
  for (const auto& r : ranks) {
    std::vector<char> x = r;
    ScaleInPlace(x.data(), n, t, pre);
    if (acc.empty())
      acc = x;
    else
      ReduceInto(acc.data(), x.data(), n, t, op);
  }
  ScaleAndAverage(acc.data(), n, t, post, op == ReduceOp::AVERAGE ? average_by : 1);
  return acc;
}

// A plan run: our pre, then NCCL's reduction as NCCL defines it (ncclAvg on floats and a
// pre-multiplied sum scale each input in its own type; ncclAvg on integers sums, then divides
// by the communicator's size), then our post and division.
std::vector<char> PlanPath(const std::vector<std::vector<char>>& ranks, DataType t,
                           const ReducePlan& p, size_t n) {
  const int size = static_cast<int>(ranks.size());
  std::vector<char> acc;
  for (const auto& r : ranks) {
    std::vector<char> x = r;
    ScaleInPlace(x.data(), n, t, p.pre);
    if (p.nccl && IsFloating(t) && (p.op == ReduceOp::AVERAGE || p.nccl_scale != 1.0))
      ScaleInPlace(x.data(), n, t,
                   static_cast<float>(p.op == ReduceOp::AVERAGE ? 1.0 / size : p.nccl_scale));
    if (acc.empty())
      acc = x;
    else
      ReduceInto(acc.data(), x.data(), n, t, p.op);
  }
  if (p.nccl && p.op == ReduceOp::AVERAGE && !IsFloating(t)) DivideIntegers(acc.data(), n, t, size);
  ScaleAndAverage(acc.data(), n, t, p.post, static_cast<int>(p.divisor));
  return acc;
}

TEST(ReducePlan, EveryPlanComputesWhatTheCpuPathComputes) {
  const size_t n = 6;
  for (int ranks : {1, 2, 3, 4})
    for (const NcclBrokenSet& broken : BrokenSets(ranks))
      for (DataType t : {DataType::FLOAT32, DataType::INT32})
        for (ReduceOp op : kOps)
          for (double pre : {1.0, 0.5})
            for (double post : {1.0, 3.0})
              for (int by : {ranks, ranks > 1 ? ranks - 1 : 1}) {
                std::vector<std::vector<char>> in;
                for (int r = 0; r < ranks; ++r) {
                  std::vector<double> x;
                  for (size_t i = 0; i < n; ++i)
                    x.push_back(static_cast<double>((r + 2) * (static_cast<int>(i) - 2)) + r);
                  in.push_back(Bytes(x, t));
                }
                const ReducePlan p = PlanReduction(broken, ranks, t, op, pre, post, by);
                const std::vector<char> want = CpuPath(in, t, op, pre, post, by, n);
                const std::vector<char> got = PlanPath(in, t, p, n);
                for (size_t i = 0; i < n; ++i) {
                  const double w = At(want, t, i), g = At(got, t, i);
                  if (IsFloating(t))
                    EXPECT_NEAR(g, w, 1e-5 * (1 + std::fabs(w)));
                  else
                    EXPECT_EQ(g, w);
                  if (HasFailure()) {
                    ADD_FAILURE() << "broken premul " << broken.premul_sum << " integer average "
                                  << broken.integer_average << " ranks " << ranks << " "
                                  << DataTypeName(t) << " " << ReduceOpName(op) << " pre " << pre
                                  << " post " << post << " by " << by << " element " << i;
                    return;
                  }
                }
              }
}

}  // namespace
}  // namespace hvd
