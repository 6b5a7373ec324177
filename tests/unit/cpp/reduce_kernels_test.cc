// Reduction kernels (common/reduce_kernels.cc): float16/bfloat16 conversions (round trips,
// rounding to nearest even, overflow, NaN/Inf), and sum/min/max/product over every dtype,
// in place and out of place, at lengths that exercise the vector loops and their tails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/reduce_kernels.h"

namespace hvd {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool HalfIsNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool BFloat16IsNaN(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }

TEST(Float16, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f = HalfToFloat(x);
    if (HalfIsNaN(x)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(HalfIsNaN(FloatToHalf(f))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToHalf(f), x) << std::hex << h;
    }
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // the largest finite half
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(Float16, RoundsToNearestEven) {
  // Half has 10 fraction bits: around 1.0 the spacing is 2^-10.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie: down to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: up to even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)),
            0x3c01);                                      // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to zero
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26)), 0x0001);
}

TEST(Float16, OverflowInfAndNaN) {
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the midpoint rounds to infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(kInf), 0x7c00);
  EXPECT_EQ(FloatToHalf(-kInf), 0xfc00);
  EXPECT_EQ(HalfToFloat(0x7c00), kInf);
  EXPECT_EQ(HalfToFloat(0xfc00), -kInf);
  EXPECT_TRUE(HalfIsNaN(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(HalfIsNaN(FloatToHalf(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(BFloat16, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const float f = BFloat16ToFloat(x);
    EXPECT_EQ(Bits(f), h << 16) << std::hex << h;  // bfloat16 is float32's upper half
    if (BFloat16IsNaN(x)) {
      EXPECT_TRUE(BFloat16IsNaN(FloatToBFloat16(f))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToBFloat16(f), x) << std::hex << h;
    }
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  // 7 fraction bits: around 1.0 the spacing is 2^-7.
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: down to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: up to even
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001)), 0x3f81);             // just above the tie
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f807fff)), 0x3f80);             // just below
  EXPECT_EQ(FloatToBFloat16(-1.0f - 3 * std::ldexp(1.0f, -8)), 0xbf82);
}

TEST(BFloat16, OverflowInfAndNaN) {
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(FloatToBFloat16(kInf), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-kInf), 0xff80);
  // A NaN stays a NaN even when its payload is all in the dropped half (it would become Inf).
  const uint16_t from_signaling = FloatToBFloat16(FromBits(0x7f800001));
  EXPECT_TRUE(BFloat16IsNaN(from_signaling)) << std::hex << from_signaling;
  EXPECT_EQ(from_signaling, 0x7fc0);  // quiet
  EXPECT_TRUE(BFloat16IsNaN(FloatToBFloat16(FromBits(0xffffffff))));
  EXPECT_TRUE(BFloat16IsNaN(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN())));
}

// A length past any vector width with a ragged tail.
constexpr size_t kN = 1000 + 13;

template <typename T>
T Apply(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::MIN: return b < a ? b : a;
    case ReduceOp::MAX: return b > a ? b : a;
    case ReduceOp::PRODUCT: return static_cast<T>(a * b);
    default: return static_cast<T>(a + b);
  }
}

const ReduceOp kOps[] = {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MIN, ReduceOp::MAX,
                         ReduceOp::PRODUCT};

// Native dtypes: compare both ReduceInto forms against the element-wise definition.
template <typename T>
void CheckNative(DataType dtype, T lo, T hi) {
  std::vector<T> a(kN), b(kN);
  for (size_t i = 0; i < kN; ++i) {
    a[i] = static_cast<T>(lo + static_cast<T>((i * 7) % static_cast<size_t>(hi - lo + 1)));
    b[i] = static_cast<T>(lo + static_cast<T>((i * 13 + 5) % static_cast<size_t>(hi - lo + 1)));
  }
  for (ReduceOp op : kOps) {
    SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " " << ReduceOpName(op));
    std::vector<T> want(kN);
    for (size_t i = 0; i < kN; ++i) want[i] = Apply(a[i], b[i], op);
    std::vector<T> in_place = a;
    ReduceInto(in_place.data(), b.data(), kN, dtype, op);
    EXPECT_EQ(in_place, want);
    std::vector<T> out(kN);
    ReduceInto(out.data(), a.data(), b.data(), kN, dtype, op);
    EXPECT_EQ(out, want);
    EXPECT_EQ(b[3], static_cast<T>(
                        lo + static_cast<T>(44 % static_cast<size_t>(hi - lo + 1))));  // untouched
  }
}

TEST(ReduceInto, Uint8) { CheckNative<uint8_t>(DataType::UINT8, 0, 15); }
TEST(ReduceInto, Int8) { CheckNative<int8_t>(DataType::INT8, -8, 7); }
TEST(ReduceInto, Uint16) { CheckNative<uint16_t>(DataType::UINT16, 0, 250); }
TEST(ReduceInto, Int16) { CheckNative<int16_t>(DataType::INT16, -120, 120); }
TEST(ReduceInto, Int32) { CheckNative<int32_t>(DataType::INT32, -1000, 1000); }
TEST(ReduceInto, Int64) { CheckNative<int64_t>(DataType::INT64, -100000, 100000); }
TEST(ReduceInto, Float32) { CheckNative<float>(DataType::FLOAT32, -50, 50); }
TEST(ReduceInto, Float64) { CheckNative<double>(DataType::FLOAT64, -50, 50); }

TEST(ReduceInto, SmallIntegersWrapLikeNumPy) {
  std::vector<uint8_t> u = {200, 255, 16};
  const std::vector<uint8_t> v = {100, 1, 16};
  ReduceInto(u.data(), v.data(), 3, DataType::UINT8, ReduceOp::SUM);
  EXPECT_EQ(u, (std::vector<uint8_t>{44, 0, 32}));
  ReduceInto(u.data(), v.data(), 3, DataType::UINT8, ReduceOp::PRODUCT);
  EXPECT_EQ(u, (std::vector<uint8_t>{static_cast<uint8_t>(4400), 0, 0}));
  std::vector<int8_t> s = {100, -128};
  const std::vector<int8_t> t = {100, -1};
  ReduceInto(s.data(), t.data(), 2, DataType::INT8, ReduceOp::SUM);
  EXPECT_EQ(s, (std::vector<int8_t>{-56, 127}));
  // 16-bit products exceed int, which C++ promotes them to: they must wrap, not overflow.
  std::vector<uint16_t> w = {65535, 40000, 1};
  const std::vector<uint16_t> x = {65535, 2, 65535};
  ReduceInto(w.data(), x.data(), 3, DataType::UINT16, ReduceOp::PRODUCT);
  EXPECT_EQ(w, (std::vector<uint16_t>{1, 14464, 65535}));
  ReduceInto(w.data(), x.data(), 3, DataType::UINT16, ReduceOp::SUM);
  EXPECT_EQ(w, (std::vector<uint16_t>{0, 14466, 65534}));
  std::vector<int16_t> y = {-32768, 32767, 300};
  const std::vector<int16_t> z = {-1, 2, 300};
  ReduceInto(y.data(), z.data(), 3, DataType::INT16, ReduceOp::PRODUCT);
  EXPECT_EQ(y, (std::vector<int16_t>{-32768, -2, 24464}));
  ReduceInto(y.data(), z.data(), 3, DataType::INT16, ReduceOp::SUM);
  EXPECT_EQ(y, (std::vector<int16_t>{32767, 0, 24764}));
}

// float16 and bfloat16: each element is widened to float32, combined, rounded back.
using ToFloat = float (*)(uint16_t);
using FromFloat = uint16_t (*)(float);

void CheckHalf(DataType dtype, ToFloat to, FromFloat from) {
  std::vector<uint16_t> a(kN), b(kN);
  for (size_t i = 0; i < kN; ++i) {
    a[i] = from(static_cast<float>(static_cast<int>(i % 41) - 20) * 0.375f);
    b[i] = from(static_cast<float>(static_cast<int>((i * 5) % 37) - 18) * 0.6f);
  }
  for (ReduceOp op : kOps) {
    SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " " << ReduceOpName(op));
    std::vector<uint16_t> want(kN);
    for (size_t i = 0; i < kN; ++i) want[i] = from(Apply(to(a[i]), to(b[i]), op));
    std::vector<uint16_t> in_place = a;
    ReduceInto(in_place.data(), b.data(), kN, dtype, op);
    EXPECT_EQ(in_place, want);
    std::vector<uint16_t> out(kN);
    ReduceInto(out.data(), a.data(), b.data(), kN, dtype, op);
    EXPECT_EQ(out, want);
  }
}

TEST(ReduceInto, Float16) { CheckHalf(DataType::FLOAT16, HalfToFloat, FloatToHalf); }
TEST(ReduceInto, BFloat16) { CheckHalf(DataType::BFLOAT16, BFloat16ToFloat, FloatToBFloat16); }

TEST(ReduceInto, HalfSumRoundsOnceFromFloat32) {
  // 2048 + 1 is not a half (spacing 2 there): the exact sum 2049 is a tie, rounded to even 2048;
  // 2048 + 3 = 2051, a tie rounded up to 2052.
  std::vector<uint16_t> a = {FloatToHalf(2048), FloatToHalf(2048)};
  const std::vector<uint16_t> b = {FloatToHalf(1), FloatToHalf(3)};
  ReduceInto(a.data(), b.data(), 2, DataType::FLOAT16, ReduceOp::SUM);
  EXPECT_EQ(HalfToFloat(a[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(a[1]), 2052.0f);
}

TEST(ReduceInto, InfinityAndNaNPropagateThroughSumAndProduct) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {kInf, kInf, nan, 1.0f, 0.0f}, b = {1.0f, -kInf, 1.0f, nan, kInf};
  std::vector<float> sum(5), prod(5);
  ReduceInto(sum.data(), a.data(), b.data(), 5, DataType::FLOAT32, ReduceOp::SUM);
  ReduceInto(prod.data(), a.data(), b.data(), 5, DataType::FLOAT32, ReduceOp::PRODUCT);
  EXPECT_EQ(sum[0], kInf);
  EXPECT_TRUE(std::isnan(sum[1]));  // inf - inf
  EXPECT_TRUE(std::isnan(sum[2]));
  EXPECT_TRUE(std::isnan(sum[3]));
  EXPECT_EQ(sum[4], kInf);
  EXPECT_TRUE(std::isnan(prod[4]));  // 0 * inf
  for (DataType dt : {DataType::FLOAT16, DataType::BFLOAT16}) {
    SCOPED_TRACE(DataTypeName(dt));
    const FromFloat from = dt == DataType::FLOAT16 ? FloatToHalf : FloatToBFloat16;
    const ToFloat to = dt == DataType::FLOAT16 ? HalfToFloat : BFloat16ToFloat;
    std::vector<uint16_t> x(5), y(5);
    for (int i = 0; i < 5; ++i) {
      x[i] = from(a[i]);
      y[i] = from(b[i]);
    }
    ReduceInto(x.data(), y.data(), 5, dt, ReduceOp::SUM);
    EXPECT_EQ(to(x[0]), kInf);
    EXPECT_TRUE(std::isnan(to(x[1])));
    EXPECT_TRUE(std::isnan(to(x[2])));
    EXPECT_TRUE(std::isnan(to(x[3])));
    EXPECT_EQ(to(x[4]), kInf);
  }
}

TEST(ReduceInto, HalfSumOverflowsToInfinity) {
  std::vector<uint16_t> a = {FloatToHalf(60000.0f), FloatToHalf(-60000.0f)};
  const std::vector<uint16_t> b = a;
  ReduceInto(a.data(), b.data(), 2, DataType::FLOAT16, ReduceOp::SUM);
  EXPECT_EQ(a[0], 0x7c00);
  EXPECT_EQ(a[1], 0xfc00);
}

TEST(ReduceInto, MinAndMaxWithInfinities) {
  std::vector<float> a = {-kInf, kInf, 3.0f}, b = {0.0f, 0.0f, -kInf};
  std::vector<float> mn(3), mx(3);
  ReduceInto(mn.data(), a.data(), b.data(), 3, DataType::FLOAT32, ReduceOp::MIN);
  ReduceInto(mx.data(), a.data(), b.data(), 3, DataType::FLOAT32, ReduceOp::MAX);
  EXPECT_EQ(mn, (std::vector<float>{-kInf, 0.0f, -kInf}));
  EXPECT_EQ(mx, (std::vector<float>{0.0f, kInf, 3.0f}));
}

TEST(ReduceInto, MinAndMaxPropagateNaNFromEitherSide) {
  // NumPy's minimum/maximum: a NaN wins wherever it is. Before, a NaN in the incoming operand
  // was dropped, so the result depended on the order the ranks were reduced in.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {nan, 1.0f, nan}, b = {1.0f, nan, nan};
  for (ReduceOp op : {ReduceOp::MIN, ReduceOp::MAX}) {
    std::vector<float> ab(3), ba(3);
    ReduceInto(ab.data(), a.data(), b.data(), 3, DataType::FLOAT32, op);
    ReduceInto(ba.data(), b.data(), a.data(), 3, DataType::FLOAT32, op);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(ab[i]) && std::isnan(ba[i])) << i;
    for (DataType dt : {DataType::FLOAT16, DataType::BFLOAT16}) {
      const FromFloat from = dt == DataType::FLOAT16 ? FloatToHalf : FloatToBFloat16;
      const ToFloat to = dt == DataType::FLOAT16 ? HalfToFloat : BFloat16ToFloat;
      std::vector<uint16_t> x = {from(1.0f), from(nan)}, y = {from(nan), from(1.0f)};
      ReduceInto(x.data(), y.data(), 2, dt, op);
      EXPECT_TRUE(std::isnan(to(x[0])) && std::isnan(to(x[1]))) << DataTypeName(dt);
    }
  }
}

TEST(ReduceInto, WideSignedIntegersWrapLikeNumPy) {
  // Computed in the unsigned type: signed overflow is undefined behaviour in C++.
  std::vector<int32_t> s = {INT32_MAX, INT32_MIN, 1 << 20};
  const std::vector<int32_t> t = {1, -1, 1 << 12};
  std::vector<int32_t> sum(3), prod(3);
  ReduceInto(sum.data(), s.data(), t.data(), 3, DataType::INT32, ReduceOp::SUM);
  ReduceInto(prod.data(), s.data(), t.data(), 3, DataType::INT32, ReduceOp::PRODUCT);
  EXPECT_EQ(sum, (std::vector<int32_t>{INT32_MIN, INT32_MAX, (1 << 20) + (1 << 12)}));
  EXPECT_EQ(prod, (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0}));  // 2^32 wraps to 0
  std::vector<int64_t> l = {INT64_MAX}, m = {2};
  ReduceInto(l.data(), m.data(), 1, DataType::INT64, ReduceOp::PRODUCT);
  EXPECT_EQ(l[0], -2);
}

TEST(ScaleInPlace, FloatsScaleAndHalvesRound) {
  std::vector<float> f = {1.0f, -3.0f, 0.5f};
  ScaleInPlace(f.data(), 3, DataType::FLOAT32, 0.5);
  EXPECT_EQ(f, (std::vector<float>{0.5f, -1.5f, 0.25f}));
  std::vector<double> d = {1.0, 3.0};
  ScaleInPlace(d.data(), 2, DataType::FLOAT64, 1.0 / 3.0);
  EXPECT_EQ(d[1], 3.0 * (1.0 / 3.0));
  std::vector<uint16_t> h = {FloatToHalf(3.0f), FloatToHalf(65504.0f)};
  ScaleInPlace(h.data(), 2, DataType::FLOAT16, 0.25);
  EXPECT_EQ(HalfToFloat(h[0]), 0.75f);
  EXPECT_EQ(HalfToFloat(h[1]), 16376.0f);
  ScaleInPlace(h.data(), 2, DataType::FLOAT16, 8.0);
  EXPECT_EQ(h[1], 0x7c00);  // 131008 overflows half
  std::vector<uint16_t> bf = {FloatToBFloat16(3.0f)};
  ScaleInPlace(bf.data(), 1, DataType::BFLOAT16, 1.0 / 3.0);
  EXPECT_EQ(bf[0], FloatToBFloat16(3.0f * static_cast<float>(1.0 / 3.0)));
}

TEST(ScaleInPlace, IntegersScaleInDoubleAndTruncate) {
  std::vector<int32_t> i = {7, -7, 1};
  ScaleInPlace(i.data(), 3, DataType::INT32, 0.5);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 0}));
  std::vector<int64_t> l = {int64_t(1) << 40};
  ScaleInPlace(l.data(), 1, DataType::INT64, 2.0);
  EXPECT_EQ(l[0], int64_t(1) << 41);
  std::vector<uint8_t> u = {9};
  ScaleInPlace(u.data(), 1, DataType::UINT8, 1.0);  // a no-op
  EXPECT_EQ(u[0], 9);
  ScaleInPlace(u.data(), 1, DataType::UINT8, 0.37);  // 3.33 -> 3
  EXPECT_EQ(u[0], 3);
}

TEST(ScaleInPlace, IntegersSaturateOutsideTheirRange) {
  std::vector<int8_t> b = {100, -100, 3};
  ScaleInPlace(b.data(), 3, DataType::INT8, 2.0);
  EXPECT_EQ(b, (std::vector<int8_t>{127, -128, 6}));
  std::vector<uint8_t> u = {200, 5};
  ScaleInPlace(u.data(), 2, DataType::UINT8, -1.0);
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
  std::vector<int64_t> l = {int64_t(1) << 62, -(int64_t(1) << 62)};
  ScaleInPlace(l.data(), 2, DataType::INT64, 4.0);
  EXPECT_EQ(l[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(l[1], std::numeric_limits<int64_t>::min());
  std::vector<int32_t> i = {0, 1};
  ScaleInPlace(i.data(), 2, DataType::INT32, std::numeric_limits<double>::infinity());
  EXPECT_EQ(i, (std::vector<int32_t>{0, std::numeric_limits<int32_t>::max()}));  // 0 * inf: NaN
}

TEST(IntegerAverage, WidenDivideNarrow) {
  EXPECT_TRUE(AveragesWidened(DataType::UINT8, ReduceOp::AVERAGE));
  EXPECT_TRUE(AveragesWidened(DataType::INT8, ReduceOp::AVERAGE));
  EXPECT_TRUE(AveragesWidened(DataType::INT32, ReduceOp::AVERAGE));
  EXPECT_TRUE(AveragesWidened(DataType::UINT16, ReduceOp::AVERAGE));
  EXPECT_TRUE(AveragesWidened(DataType::INT16, ReduceOp::AVERAGE));
  EXPECT_FALSE(AveragesWidened(DataType::INT64, ReduceOp::AVERAGE));
  EXPECT_FALSE(AveragesWidened(DataType::FLOAT16, ReduceOp::AVERAGE));
  EXPECT_FALSE(AveragesWidened(DataType::INT8, ReduceOp::SUM));
  // Three ranks' int8 values 100 + 100 + 101 = 301 would wrap in int8; in int64 the average is 100.
  const std::vector<int8_t> r0 = {100, -100}, r1 = {100, -100}, r2 = {101, -101};
  std::vector<int64_t> acc(2), tmp(2);
  WidenToInt64(r0.data(), DataType::INT8, acc.data(), 2);
  for (const auto* r : {&r1, &r2}) {
    WidenToInt64(r->data(), DataType::INT8, tmp.data(), 2);
    ReduceInto(acc.data(), tmp.data(), 2, DataType::INT64, ReduceOp::SUM);
  }
  DivideIntegers(acc.data(), 2, DataType::INT64, 3);
  std::vector<int8_t> out(2);
  NarrowFromInt64(acc.data(), DataType::INT8, out.data(), 2);
  EXPECT_EQ(out, (std::vector<int8_t>{100, -100}));  // -301 / 3 truncates toward zero
  std::vector<int32_t> d = {-7, 7};
  DivideIntegers(d.data(), 2, DataType::INT32, 2);
  EXPECT_EQ(d, (std::vector<int32_t>{-3, 3}));
  std::vector<float> f = {7.0f};
  DivideIntegers(f.data(), 1, DataType::FLOAT32, 2);  // not for floats: untouched
  EXPECT_EQ(f[0], 7.0f);
}

}  // namespace
}  // namespace hvd
