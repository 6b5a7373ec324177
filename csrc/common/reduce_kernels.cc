// Every kernel body is an always_inline template instantiated inside per-dtype entry points
// that GCC clones for x86-64-v3 (AVX2/F16C) and x86-64-v4 (AVX-512): the image runs on any
// x86-64 host and still uses the widest vectors the CPU has, picked once at load time.
#include "common/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HVD_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HVD_MULTIVERSION
#endif
#define HVD_INLINE __attribute__((always_inline)) inline

namespace hvd {
namespace {

HVD_INLINE float Bf16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

HVD_INLINE uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

#if defined(__FLT16_MAX__)
using half_t = _Float16;
HVD_INLINE float F16ToF32(half_t h) { return static_cast<float>(h); }
HVD_INLINE half_t F32ToF16(float f) { return static_cast<half_t>(f); }
#else
#error "a compiler with _Float16 support is required (GCC >= 12 or Clang >= 15)"
#endif

// Integer sums and products wrap like NumPy's: computed in an unsigned type, where overflow is
// defined (in a signed type it is undefined behaviour, which the optimizer may exploit). Types
// narrower than int are promoted to (signed) int by C++'s arithmetic, where 65535 * 65535
// overflows: they are computed in unsigned int. Floats as they are.
template <typename W>
using WrapT = std::conditional_t<(sizeof(W) < sizeof(unsigned)), unsigned, std::make_unsigned_t<W>>;
template <typename W>
HVD_INLINE W WrapAdd(W x, W y) {
  if constexpr (std::is_integral_v<W>)
    return static_cast<W>(static_cast<WrapT<W>>(x) + static_cast<WrapT<W>>(y));
  else
    return x + y;
}
template <typename W>
HVD_INLINE W WrapMul(W x, W y) {
  if constexpr (std::is_integral_v<W>)
    return static_cast<W>(static_cast<WrapT<W>>(x) * static_cast<WrapT<W>>(y));
  else
    return x * y;
}

// d[i] = a[i] (op) b[i], computed in the widened type W. With kInPlace, `a` is `d` and is read
// through `d`, so every __restrict promise holds and each op's loop vectorizes on its own.
template <bool kInPlace, typename W, typename T, typename Widen, typename Narrow>
HVD_INLINE void ReduceLoop(T* __restrict d, const T* __restrict a, const T* __restrict b, size_t n,
                           ReduceOp op, Widen widen, Narrow narrow) {
#define HVD_A(i) widen(kInPlace ? d[i] : a[i])
  switch (op) {
    // A NaN on either side wins (y != y: y is NaN; never true for integers), as in NumPy's
    // minimum/maximum: otherwise it survived only where it was already the accumulator, so the
    // result depended on the order the ring reduced the ranks in.
    case ReduceOp::MIN:
      for (size_t i = 0; i < n; ++i) {
        W x = HVD_A(i), y = widen(b[i]);
        d[i] = narrow((y < x || y != y) ? y : x);
      }
      break;
    case ReduceOp::MAX:
      for (size_t i = 0; i < n; ++i) {
        W x = HVD_A(i), y = widen(b[i]);
        d[i] = narrow((y > x || y != y) ? y : x);
      }
      break;
    case ReduceOp::PRODUCT:
      for (size_t i = 0; i < n; ++i) d[i] = narrow(WrapMul<W>(HVD_A(i), widen(b[i])));
      break;
    default:
      for (size_t i = 0; i < n; ++i) d[i] = narrow(WrapAdd<W>(HVD_A(i), widen(b[i])));
      break;
  }
#undef HVD_A
}

template <typename W, typename T, typename Widen, typename Narrow>
HVD_INLINE void Reduce(T* d, const T* a, const T* b, size_t n, ReduceOp op, Widen widen,
                       Narrow narrow) {
  if (a == d)
    ReduceLoop<true, W>(d, static_cast<const T*>(nullptr), b, n, op, widen, narrow);
  else
    ReduceLoop<false, W>(d, a, b, n, op, widen, narrow);
}

template <typename T>
HVD_INLINE void ReduceNative(T* d, const T* a, const T* b, size_t n, ReduceOp op) {
  Reduce<T>(d, a, b, n, op, [](T x) { return x; }, [](T x) { return static_cast<T>(x); });
}

template <typename T, typename F>
HVD_INLINE void ScaleLoop(T* __restrict b, size_t n, F factor) {
  if constexpr (std::is_integral_v<T>) {
    // Saturating: int64's max is not a double, so the top is compared as "at or past 2^63".
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    for (size_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(b[i]) * factor;
      b[i] = v >= hi   ? std::numeric_limits<T>::max()
             : v > lo  ? static_cast<T>(v)
             : v <= lo ? std::numeric_limits<T>::min()
                       : T(0);  // NaN (an infinite factor times 0)
    }
  } else {
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<T>(static_cast<F>(b[i]) * factor);
  }
}

#define HVD_NATIVE_REDUCE(fn, T)                                                  \
  HVD_MULTIVERSION void fn(T* d, const T* a, const T* b, size_t n, ReduceOp op) { \
    ReduceNative(d, a, b, n, op);                                                 \
  }
HVD_NATIVE_REDUCE(ReduceU8, uint8_t)
HVD_NATIVE_REDUCE(ReduceI8, int8_t)
HVD_NATIVE_REDUCE(ReduceU16, uint16_t)
HVD_NATIVE_REDUCE(ReduceI16, int16_t)
HVD_NATIVE_REDUCE(ReduceI32, int32_t)
HVD_NATIVE_REDUCE(ReduceI64, int64_t)
HVD_NATIVE_REDUCE(ReduceF32, float)
HVD_NATIVE_REDUCE(ReduceF64, double)
#undef HVD_NATIVE_REDUCE
HVD_MULTIVERSION void ReduceF16(half_t* d, const half_t* a, const half_t* b, size_t n,
                                ReduceOp op) {
  Reduce<float>(
      d, a, b, n, op, [](half_t h) { return F16ToF32(h); }, [](float f) { return F32ToF16(f); });
}
HVD_MULTIVERSION void ReduceBF16(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n,
                                 ReduceOp op) {
  Reduce<float>(
      d, a, b, n, op, [](uint16_t h) { return Bf16ToF32(h); },
      [](float f) { return F32ToBf16(f); });
}

HVD_MULTIVERSION void ScaleF32(float* b, size_t n, float f) { ScaleLoop(b, n, f); }
HVD_MULTIVERSION void ScaleF64(double* b, size_t n, double f) { ScaleLoop(b, n, f); }
HVD_MULTIVERSION void ScaleF16(half_t* b, size_t n, float f) {
  for (size_t i = 0; i < n; ++i) b[i] = F32ToF16(F16ToF32(b[i]) * f);
}
HVD_MULTIVERSION void ScaleBF16(uint16_t* b, size_t n, float f) {
  for (size_t i = 0; i < n; ++i) b[i] = F32ToBf16(Bf16ToF32(b[i]) * f);
}

}  // namespace

void ReduceInto(void* dst, const void* a, const void* b, size_t n, DataType dtype, ReduceOp op) {
#define HVD_CASE(dt, fn, T)                                                              \
  case DataType::dt:                                                                     \
    fn(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n, op); \
    break;
  switch (dtype) {
    HVD_CASE(UINT8, ReduceU8, uint8_t)
    HVD_CASE(INT8, ReduceI8, int8_t)
    HVD_CASE(UINT16, ReduceU16, uint16_t)
    HVD_CASE(INT16, ReduceI16, int16_t)
    HVD_CASE(INT32, ReduceI32, int32_t)
    HVD_CASE(INT64, ReduceI64, int64_t)
    HVD_CASE(FLOAT16, ReduceF16, half_t)
    HVD_CASE(BFLOAT16, ReduceBF16, uint16_t)
    HVD_CASE(FLOAT32, ReduceF32, float)
    HVD_CASE(FLOAT64, ReduceF64, double)
    case DataType::BOOL: break;  // never reduced: refused at negotiation (UnsupportedReduction)
  }
#undef HVD_CASE
}

void ReduceInto(void* dst, const void* src, size_t n, DataType dtype, ReduceOp op) {
  ReduceInto(dst, dst, src, n, dtype, op);
}

void ScaleInPlace(void* buf, size_t n, DataType dtype, double factor) {
  if (factor == 1.0) return;
  switch (dtype) {
    case DataType::UINT8: ScaleLoop(static_cast<uint8_t*>(buf), n, factor); break;
    case DataType::INT8: ScaleLoop(static_cast<int8_t*>(buf), n, factor); break;
    case DataType::UINT16: ScaleLoop(static_cast<uint16_t*>(buf), n, factor); break;
    case DataType::INT16: ScaleLoop(static_cast<int16_t*>(buf), n, factor); break;
    case DataType::INT32: ScaleLoop(static_cast<int32_t*>(buf), n, factor); break;
    case DataType::INT64: ScaleLoop(static_cast<int64_t*>(buf), n, factor); break;
    case DataType::FLOAT16:
      ScaleF16(static_cast<half_t*>(buf), n, static_cast<float>(factor));
      break;
    case DataType::BFLOAT16:
      ScaleBF16(static_cast<uint16_t*>(buf), n, static_cast<float>(factor));
      break;
    case DataType::FLOAT32:
      ScaleF32(static_cast<float*>(buf), n, static_cast<float>(factor));
      break;
    case DataType::FLOAT64: ScaleF64(static_cast<double*>(buf), n, factor); break;
    case DataType::BOOL: break;  // never scaled: not a reduction dtype
  }
}

void DivideIntegers(void* buf, size_t n, DataType dtype, int64_t d) {
  auto div = [n, d](auto* b) {
    for (size_t i = 0; i < n; ++i)
      b[i] = static_cast<std::remove_reference_t<decltype(*b)>>(b[i] / d);
  };
  switch (dtype) {
    case DataType::UINT8: div(static_cast<uint8_t*>(buf)); break;
    case DataType::INT8: div(static_cast<int8_t*>(buf)); break;
    case DataType::UINT16: div(static_cast<uint16_t*>(buf)); break;
    case DataType::INT16: div(static_cast<int16_t*>(buf)); break;
    case DataType::INT32: div(static_cast<int32_t*>(buf)); break;
    case DataType::INT64: div(static_cast<int64_t*>(buf)); break;
    default: break;
  }
}

void ScaleAndAverage(void* buf, size_t n, DataType dtype, double postscale, int average_by) {
  if (IsFloating(dtype)) {
    ScaleInPlace(buf, n, dtype, postscale / average_by);
  } else {
    ScaleInPlace(buf, n, dtype, postscale);
    if (average_by > 1) DivideIntegers(buf, n, dtype, average_by);
  }
}

bool AveragesWidened(DataType dtype, ReduceOp op) {
  return op == ReduceOp::AVERAGE && IsInteger(dtype) && dtype != DataType::INT64;
}

void WidenToInt64(const void* src, DataType dtype, int64_t* dst, size_t n) {
  auto widen = [&](const auto* s) {
    for (size_t i = 0; i < n; ++i) dst[i] = s[i];
  };
  switch (dtype) {
    case DataType::UINT8: widen(static_cast<const uint8_t*>(src)); break;
    case DataType::INT8: widen(static_cast<const int8_t*>(src)); break;
    case DataType::UINT16: widen(static_cast<const uint16_t*>(src)); break;
    case DataType::INT16: widen(static_cast<const int16_t*>(src)); break;
    case DataType::INT32: widen(static_cast<const int32_t*>(src)); break;
    default: std::memcpy(dst, src, n * sizeof(int64_t)); break;
  }
}

void NarrowFromInt64(const int64_t* src, DataType dtype, void* dst, size_t n) {
  auto narrow = [&](auto* d) {
    for (size_t i = 0; i < n; ++i)
      d[i] = static_cast<std::remove_reference_t<decltype(*d)>>(src[i]);
  };
  switch (dtype) {
    case DataType::UINT8: narrow(static_cast<uint8_t*>(dst)); break;
    case DataType::INT8: narrow(static_cast<int8_t*>(dst)); break;
    case DataType::UINT16: narrow(static_cast<uint16_t*>(dst)); break;
    case DataType::INT16: narrow(static_cast<int16_t*>(dst)); break;
    case DataType::INT32: narrow(static_cast<int32_t*>(dst)); break;
    default: std::memcpy(dst, src, n * sizeof(int64_t)); break;
  }
}

float HalfToFloat(uint16_t h) {
  half_t x;
  std::memcpy(&x, &h, 2);
  return F16ToF32(x);
}
uint16_t FloatToHalf(float f) {
  half_t x = F32ToF16(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}
float BFloat16ToFloat(uint16_t h) { return Bf16ToF32(h); }
uint16_t FloatToBFloat16(float f) { return F32ToBf16(f); }

}  // namespace hvd
