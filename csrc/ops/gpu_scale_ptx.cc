// The scaling kernels' PTX (gpu_scale_ptx.h), written out per dtype from one loop. Registers:
// %rd1 dst, %rd2 src, %rd3 count, %rd4 index, %rd6 stride, %rd7 byte offset, %rd8/%rd9 the
// element's source/destination address, %rd10 divisor, %rd11 an integer element; %fd1 the
// factor, %f1 the factor as float32.
#include "ops/gpu_scale_ptx.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace hvd {
namespace {

struct Kernel {
  DataType dtype;
  const char* name;
  int log2_size;
};

const Kernel kKernels[] = {
    {DataType::UINT8, "hvd_scale_uint8", 0},     {DataType::INT8, "hvd_scale_int8", 0},
    {DataType::INT32, "hvd_scale_int32", 2},     {DataType::INT64, "hvd_scale_int64", 3},
    {DataType::FLOAT16, "hvd_scale_float16", 1}, {DataType::BFLOAT16, "hvd_scale_bfloat16", 1},
    {DataType::FLOAT32, "hvd_scale_float32", 2}, {DataType::FLOAT64, "hvd_scale_float64", 3},
};

// A double as PTX writes it exactly: 0d and its IEEE bits.
std::string F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0d%016" PRIX64, bits);
  return buf;
}

std::string B64(int64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016" PRIX64, static_cast<uint64_t>(v));
  return buf;
}

// The element's work for an integer type: ScaleLoop's saturating truncation, then the division.
std::string IntegerBody(const char* type, int64_t lo, int64_t hi) {
  // The comparisons are ScaleLoop's, in double: at or past the top (2^63 for int64, which is
  // not an int64) saturates high, at or below the bottom saturates low, NaN becomes 0.
  return std::string("  ld.global.") + type + " %rd11, [%rd8];\n" +  //
         "  @!%p2 bra $L_{k}_divide;\n" +                            //
         "  cvt.rn.f64.s64 %fd2, %rd11;\n" +                         //
         "  mul.rn.f64 %fd2, %fd2, %fd1;\n" +                        //
         "  cvt.rzi.s64.f64 %rd11, %fd2;\n" +                        //
         "  setp.ge.f64 %p4, %fd2, " + F64(static_cast<double>(hi)) + ";\n" +
         "  setp.le.f64 %p5, %fd2, " + F64(static_cast<double>(lo)) + ";\n" +
         "  setp.nan.f64 %p6, %fd2, %fd2;\n" +                 //
         "  selp.b64 %rd11, " + B64(hi) + ", %rd11, %p4;\n" +  //
         "  selp.b64 %rd11, " + B64(lo) + ", %rd11, %p5;\n" +  //
         "  selp.b64 %rd11, 0, %rd11, %p6;\n" +                //
         "$L_{k}_divide:\n" +                                  //
         "  @%p3 div.s64 %rd11, %rd11, %rd10;\n" +             //
         "  st.global." + type + " [%rd9], %rd11;\n";
}

std::string Body(const Kernel& k) {
  switch (k.dtype) {
    case DataType::UINT8: return IntegerBody("u8", 0, 255);
    case DataType::INT8: return IntegerBody("s8", -128, 127);
    case DataType::INT32: return IntegerBody("s32", INT32_MIN, INT32_MAX);
    case DataType::INT64: return IntegerBody("s64", INT64_MIN, INT64_MAX);
    // A factor of 1 leaves every value as it is, NaN payloads included (ScaleInPlace returns).
    case DataType::FLOAT32:
      return "  ld.global.f32 %f2, [%rd8];\n"
             "  @%p2 mul.rn.f32 %f2, %f2, %f1;\n"
             "  st.global.f32 [%rd9], %f2;\n";
    case DataType::FLOAT64:
      return "  ld.global.f64 %fd2, [%rd8];\n"
             "  @%p2 mul.rn.f64 %fd2, %fd2, %fd1;\n"
             "  st.global.f64 [%rd9], %fd2;\n";
    case DataType::FLOAT16:
      return "  ld.global.b16 %rs1, [%rd8];\n"
             "  @!%p2 bra $L_{k}_store;\n"
             "  cvt.f32.f16 %f2, %rs1;\n"
             "  mul.rn.f32 %f2, %f2, %f1;\n"
             "  cvt.rn.f16.f32 %rs1, %f2;\n"
             "$L_{k}_store:\n"
             "  st.global.b16 [%rd9], %rs1;\n";
    case DataType::BFLOAT16:
      // Widened by its bits; narrowed as FloatToBFloat16: NaN quieted, else round to nearest
      // even by adding 0x7fff and the kept part's lowest bit. No bf16 instructions (sm_80+).
      return "  ld.global.u16 %r5, [%rd8];\n"
             "  @!%p2 bra $L_{k}_store;\n"
             "  shl.b32 %r1, %r5, 16;\n"
             "  mov.b32 %f2, %r1;\n"
             "  mul.rn.f32 %f2, %f2, %f1;\n"
             "  mov.b32 %r2, %f2;\n"
             "  and.b32 %r3, %r2, 0x7FFFFFFF;\n"
             "  setp.gt.u32 %p4, %r3, 0x7F800000;\n"
             "  shr.u32 %r4, %r2, 16;\n"
             "  and.b32 %r5, %r4, 1;\n"
             "  add.u32 %r5, %r5, 0x7FFF;\n"
             "  add.u32 %r5, %r2, %r5;\n"
             "  shr.u32 %r5, %r5, 16;\n"
             "  or.b32 %r4, %r4, 0x40;\n"
             "  selp.b32 %r5, %r4, %r5, %p4;\n"
             "$L_{k}_store:\n"
             "  st.global.u16 [%rd9], %r5;\n";
    case DataType::BOOL:
    case DataType::UINT16:
    case DataType::INT16: break;
  }
  return "";
}

// Every "{k}" of a kernel's text becomes its name: labels are unique across the module.
std::string Named(std::string text, const std::string& name) {
  for (size_t at = text.find("{k}"); at != std::string::npos; at = text.find("{k}", at))
    text.replace(at, 3, name);
  return text;
}

std::string Entry(const Kernel& k) {
  const std::string text =
      ".visible .entry {k}(\n"
      "    .param .u64 p_dst, .param .u64 p_src, .param .u64 p_count,\n"
      "    .param .f64 p_factor, .param .s64 p_divisor)\n"
      "{\n"
      "  .reg .pred %p<8>;\n"
      "  .reg .b16 %rs<4>;\n"
      "  .reg .b32 %r<16>;\n"
      "  .reg .b64 %rd<16>;\n"
      "  .reg .f32 %f<4>;\n"
      "  .reg .f64 %fd<4>;\n"
      "  ld.param.u64 %rd1, [p_dst];\n"
      "  ld.param.u64 %rd2, [p_src];\n"
      "  ld.param.u64 %rd3, [p_count];\n"
      "  ld.param.f64 %fd1, [p_factor];\n"
      "  ld.param.s64 %rd10, [p_divisor];\n"
      "  cvta.to.global.u64 %rd1, %rd1;\n"
      "  cvta.to.global.u64 %rd2, %rd2;\n"
      "  cvt.rn.f32.f64 %f1, %fd1;\n"
      "  setp.neu.f64 %p2, %fd1, 0d3FF0000000000000;\n"  // factor != 1
      "  setp.gt.s64 %p3, %rd10, 1;\n"                   // divisor > 1
      // index = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x
      "  mov.u32 %r10, %ctaid.x;\n"
      "  mov.u32 %r11, %ntid.x;\n"
      "  mov.u32 %r12, %tid.x;\n"
      "  mov.u32 %r13, %nctaid.x;\n"
      "  mul.wide.u32 %rd4, %r10, %r11;\n"
      "  cvt.u64.u32 %rd5, %r12;\n"
      "  add.u64 %rd4, %rd4, %rd5;\n"
      "  mul.wide.u32 %rd6, %r13, %r11;\n"
      "$L_{k}_loop:\n"
      "  setp.ge.u64 %p1, %rd4, %rd3;\n"
      "  @%p1 bra $L_{k}_done;\n"
      "  shl.b64 %rd7, %rd4, " +
      std::to_string(k.log2_size) +
      ";\n"
      "  add.u64 %rd8, %rd2, %rd7;\n"
      "  add.u64 %rd9, %rd1, %rd7;\n" +
      Body(k) +
      "  add.u64 %rd4, %rd4, %rd6;\n"
      "  bra $L_{k}_loop;\n"
      "$L_{k}_done:\n"
      "  ret;\n"
      "}\n";
  return Named(text, k.name);
}

}  // namespace

const char* ScaleKernelName(DataType dtype) {
  for (const Kernel& k : kKernels)
    if (k.dtype == dtype) return k.name;
  return nullptr;
}

std::string ScaleKernelsPtx() {
  std::string ptx =
      "// Horovod's scaling kernels (csrc/ops/gpu_scale_ptx.cc)\n"
      ".version 7.0\n"
      ".target sm_70\n"
      ".address_size 64\n";
  for (const Kernel& k : kKernels) ptx += "\n" + Entry(k);
  return ptx;
}

}  // namespace hvd
