// Element-wise reduction and scaling kernels, one vectorized loop per dtype. float16 and
// bfloat16 are widened to float32, combined, and rounded back (round to nearest even).
#pragma once

#include <cstddef>

#include "common/common.h"

namespace hvd {

// dst[i] = dst[i] (op) src[i]; AVERAGE reduces as SUM (the caller scales afterwards).
void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);
// dst[i] = a[i] (op) b[i]; `a` may be `dst`, `b` must not overlap `dst`.
void ReduceInto(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op);
// buf[i] *= factor, computed in double for float64 and integers, float32 for the rest. Integers
// as upstream: the product truncated toward zero (a prescale truncates each rank's share before
// the sum); beyond the type's range it saturates (C++'s conversion would be undefined there).
void ScaleInPlace(void* buf, size_t count, DataType dtype, double factor);

// Integer Average: buf[i] /= divisor, truncating toward zero like C. No-op for floating types.
void DivideIntegers(void* buf, size_t count, DataType dtype, int64_t divisor);
// A reduced sum's last step: times `postscale`, then divided by `average_by` (1: not an
// Average). Floats multiply once by postscale / average_by; integers are scaled, then divided
// (truncating), so that exact sums stay exact.
void ScaleAndAverage(void* buf, size_t count, DataType dtype, double postscale, int average_by);

// Integer Average reduces in int64 so that (u)int8/(u)int16/int32 sums cannot wrap before the
// division: widen the inputs, reduce, divide, narrow the (in-range) averages back.
bool AveragesWidened(DataType dtype, ReduceOp op);
void WidenToInt64(const void* src, DataType dtype, int64_t* dst, size_t count);
void NarrowFromInt64(const int64_t* src, DataType dtype, void* dst, size_t count);

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);

}  // namespace hvd
