// Horovod's own scaling kernels for GPU reductions, as PTX text: the build has no CUDA compiler
// (only the runtime's and NCCL's headers and libraries), so the driver compiles this PTX for the
// device it runs on (nccl_scale.cc loads it). No CUDA here: the CPU build and its unit tests
// carry it, and the tests assemble it with ptxas where one is installed.
//
// One kernel per reducible dtype, named ScaleKernelName(dtype), with parameters
// (u64 dst, u64 src, u64 count, f64 factor, s64 divisor): dst[i] = src[i] * factor over every
// i < count (src may be dst), exactly as the CPU path's ScaleInPlace and DivideIntegers do it.
// A factor of 1 leaves every value as it is (an int64 beyond 2^53 stays exact, a NaN's bits
// too); any other:
//   float32, float16, bfloat16: in float32, factor rounded to float32 first, results rounded to
//     nearest even (bfloat16's NaNs quieted as FloatToBFloat16 does); float64: in float64;
//   integers: multiplies in float64, truncates toward zero and saturates at the type's range
//     (NaN: 0);
//     then, if divisor > 1, divides by it truncating toward zero (integer Average). Floating
//     kernels ignore the divisor (the caller folds it into the factor).
// A grid-stride loop over a 64-bit index: any count and any grid cover every element once.
#pragma once

#include <string>

#include "common/common.h"

namespace hvd {

// The kernel's name for a reducible dtype; nullptr for those without one (bool, 16-bit integers:
// never reduced on the GPU).
const char* ScaleKernelName(DataType dtype);
// The PTX module holding every kernel (PTX ISA 7.0, target sm_70: any GPU of CUDA 12 and 13).
std::string ScaleKernelsPtx();

}  // namespace hvd
