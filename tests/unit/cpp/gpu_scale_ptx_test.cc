// Horovod's own scaling kernels (ops/gpu_scale_ptx.h) without a GPU: the PTX module assembles
// with ptxas for the GPUs CUDA 12 and 13 run (where a ptxas is installed: HOROVOD_PTXAS, the
// build venv's nvidia-cuda-nvcc wheel, or PATH), and a small interpreter of the instructions
// the module uses runs each kernel over host memory, with several blocks and threads, against
// the CPU path's ScaleInPlace and DivideIntegers: every element written once, nothing past the
// count, odd counts, in place and out of place, NaN and saturation. The interpreter takes each
// instruction as the PTX ISA defines it; that the GPU does is NVIDIA's part.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/reduce_kernels.h"
#include "ops/gpu_scale_ptx.h"

namespace hvd {
namespace {

const DataType kScaled[] = {DataType::UINT8,   DataType::INT8,    DataType::INT32,
                            DataType::INT64,   DataType::FLOAT16, DataType::BFLOAT16,
                            DataType::FLOAT32, DataType::FLOAT64};

TEST(ScalePtx, OneKernelPerReducibleDtype) {
  const std::string ptx = ScaleKernelsPtx();
  EXPECT_EQ(ptx.find(".version 7.0"), ptx.find(".version"));
  for (DataType t : kScaled) {
    ASSERT_NE(ScaleKernelName(t), nullptr) << DataTypeName(t);
    EXPECT_NE(ptx.find(std::string(".entry ") + ScaleKernelName(t) + "("), std::string::npos);
  }
  for (DataType t : {DataType::BOOL, DataType::UINT16, DataType::INT16})
    EXPECT_EQ(ScaleKernelName(t), nullptr) << DataTypeName(t);
}

std::string FindPtxas() {
  if (const char* p = std::getenv("HOROVOD_PTXAS")) return p;
  // This file is <root>/tests/unit/cpp/...: the build venv holds nvidia-cuda-nvcc's ptxas.
  std::string root = __FILE__;
  for (int i = 0; i < 4; ++i) root = root.substr(0, root.rfind('/'));
  for (const char* py : {"python3.11", "python3.12", "python3.13", "python3.10"}) {
    const std::string p =
        root + "/build/venv/lib/" + py + "/site-packages/nvidia/cuda_nvcc/bin/ptxas";
    if (std::ifstream(p).good()) return p;
  }
  return std::system("command -v ptxas >/dev/null 2>&1") == 0 ? "ptxas" : "";
}

TEST(ScalePtx, AssemblesForEveryGpuGeneration) {
  const std::string ptxas = FindPtxas();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas here (set HOROVOD_PTXAS)";
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/hvd_scale.ptx";
  std::ofstream(file) << ScaleKernelsPtx();
  for (const char* arch : {"sm_70", "sm_80", "sm_90", "sm_100"}) {
    const std::string cmd = "'" + ptxas + "' -arch=" + arch + " '" + file + "' -o '" + dir +
                            "/hvd_scale.cubin' 2>" + dir + "/ptxas.err";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << arch << ": " << cmd;
  }
}

// ---- an interpreter of the module's instructions ---------------------------------------------

struct Insn {
  std::string pred;  // "", "%p2" or "!%p2"
  std::string op;
  std::vector<std::string> args;
};

struct Kernel {
  std::vector<std::string> params;
  std::vector<Insn> code;
  std::map<std::string, size_t> labels;
};

std::map<std::string, Kernel> Parse(const std::string& ptx) {
  std::map<std::string, Kernel> out;
  std::istringstream in(ptx);
  std::string line, name;
  Kernel* k = nullptr;
  bool body = false;
  while (std::getline(in, line)) {
    const size_t a = line.find_first_not_of(" \t");
    if (a == std::string::npos) continue;
    line = line.substr(a);
    if (line.rfind(".visible .entry ", 0) == 0) {
      name = line.substr(16, line.find('(') - 16);
      k = &out[name];
      body = false;
      continue;
    }
    if (!k) continue;
    if (!body) {
      if (line == "{") body = true;
      for (size_t p = line.find(".param "); p != std::string::npos;
           p = line.find(".param ", p + 1)) {
        std::istringstream ps(line.substr(p));
        std::string kw, type, pname;
        ps >> kw >> type >> pname;
        if (pname.back() == ',' || pname.back() == ')') pname.pop_back();
        k->params.push_back(pname);
      }
      continue;
    }
    if (line == "}") {
      k = nullptr;
      continue;
    }
    if (line[0] == '.' || line[0] == '/') continue;  // declarations, comments
    if (line.back() == ':') {
      k->labels[line.substr(0, line.size() - 1)] = k->code.size();
      continue;
    }
    Insn i;
    std::string rest = line.substr(0, line.find(';'));
    if (rest[0] == '@') {
      const size_t sp = rest.find(' ');
      i.pred = rest.substr(1, sp - 1);
      rest = rest.substr(sp + 1);
    }
    const size_t sp = rest.find(' ');
    i.op = rest.substr(0, sp);
    if (sp != std::string::npos) {
      std::istringstream as(rest.substr(sp + 1));
      std::string arg;
      while (std::getline(as, arg, ',')) {
        const size_t b = arg.find_first_not_of(' '), e = arg.find_last_not_of(' ');
        i.args.push_back(arg.substr(b, e - b + 1));
      }
    }
    k->code.push_back(i);
  }
  return out;
}

double AsF64(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
uint64_t F64Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}
float AsF32(uint64_t b) {
  const uint32_t u = static_cast<uint32_t>(b);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint64_t F32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// One thread of `k`: params by name as bit patterns, its block and thread numbers.
void RunThread(const Kernel& k, const std::map<std::string, uint64_t>& params, uint32_t ctaid,
               uint32_t ntid, uint32_t tid, uint32_t nctaid) {
  std::map<std::string, uint64_t> reg;
  auto val = [&](const std::string& s) -> uint64_t {
    if (s == "%ctaid.x") return ctaid;
    if (s == "%ntid.x") return ntid;
    if (s == "%tid.x") return tid;
    if (s == "%nctaid.x") return nctaid;
    if (s[0] == '%') return reg.at(s);
    if (s.rfind("0d", 0) == 0) return std::stoull(s.substr(2), nullptr, 16);
    if (s.rfind("0x", 0) == 0) return std::stoull(s.substr(2), nullptr, 16);
    return static_cast<uint64_t>(std::stoll(s));
  };
  auto addr = [&](const std::string& s) { return val(s.substr(1, s.size() - 2)); };
  size_t steps = 0;
  for (size_t pc = 0; pc < k.code.size();) {
    if (++steps > 1000000) {  // a loop that never ends (a stride of 0) fails instead of hanging
      ADD_FAILURE() << "thread " << tid << " of block " << ctaid << " never returns";
      return;
    }
    const Insn& i = k.code[pc++];
    if (!i.pred.empty()) {
      const bool neg = i.pred[0] == '!';
      if ((reg.at(neg ? i.pred.substr(1) : i.pred) != 0) == neg) continue;
    }
    const std::string& op = i.op;
    const auto& a = i.args;
    auto set = [&](uint64_t v) { reg[a[0]] = v; };
    const std::string type = op.substr(op.rfind('.') + 1);
    if (op == "ret") return;
    if (op == "bra") {
      pc = k.labels.at(a[0]);
    } else if (op.rfind("ld.param.", 0) == 0) {
      set(params.at(a[1].substr(1, a[1].size() - 2)));
    } else if (op == "cvta.to.global.u64" || op == "mov.u32" || op == "mov.b32") {
      set(op == "cvta.to.global.u64" ? val(a[1]) : val(a[1]) & 0xffffffffu);
    } else if (op == "mul.wide.u32") {
      set(static_cast<uint64_t>(static_cast<uint32_t>(val(a[1]))) *
          static_cast<uint32_t>(val(a[2])));
    } else if (op == "cvt.u64.u32") {
      set(static_cast<uint32_t>(val(a[1])));
    } else if (op == "add.u64") {
      set(val(a[1]) + val(a[2]));
    } else if (op == "add.u32") {
      set(static_cast<uint32_t>(val(a[1]) + val(a[2])));
    } else if (op == "shl.b64") {
      set(val(a[1]) << val(a[2]));
    } else if (op == "shl.b32") {
      set(static_cast<uint32_t>(val(a[1]) << val(a[2])));
    } else if (op == "shr.u32") {
      set(static_cast<uint32_t>(val(a[1])) >> val(a[2]));
    } else if (op == "and.b32") {
      set(static_cast<uint32_t>(val(a[1]) & val(a[2])));
    } else if (op == "or.b32") {
      set(static_cast<uint32_t>(val(a[1]) | val(a[2])));
    } else if (op.rfind("selp.", 0) == 0) {
      set(reg.at(a[3]) ? val(a[1]) : val(a[2]));
    } else if (op == "div.s64") {
      set(static_cast<uint64_t>(static_cast<int64_t>(val(a[1])) / static_cast<int64_t>(val(a[2]))));
    } else if (op.rfind("setp.", 0) == 0) {
      const std::string cmp = op.substr(5, op.find('.', 5) - 5);
      const uint64_t x = val(a[1]), y = val(a[2]);
      const double dx = AsF64(x), dy = AsF64(y);
      const std::string form = cmp + "." + type;
      bool r;
      if (form == "neu.f64")
        r = !(dx == dy);  // not equal, or unordered
      else if (form == "ge.f64")
        r = dx >= dy;
      else if (form == "le.f64")
        r = dx <= dy;
      else if (form == "nan.f64")
        r = std::isnan(dx) || std::isnan(dy);
      else if (form == "gt.s64")
        r = static_cast<int64_t>(x) > static_cast<int64_t>(y);
      else if (form == "ge.u64")
        r = x >= y;
      else if (form == "gt.u32")
        r = static_cast<uint32_t>(x) > static_cast<uint32_t>(y);
      else {
        ADD_FAILURE() << "the interpreter has no " << op;
        return;
      }
      set(r);
    } else if (op.rfind("ld.global.", 0) == 0) {
      const char* p = reinterpret_cast<const char*>(addr(a[1]));
      uint64_t v = 0;
      if (type == "u8") v = *reinterpret_cast<const uint8_t*>(p);
      if (type == "s8")
        v = static_cast<uint64_t>(static_cast<int64_t>(*reinterpret_cast<const int8_t*>(p)));
      if (type == "u16" || type == "b16") v = *reinterpret_cast<const uint16_t*>(p);
      if (type == "s32")
        v = static_cast<uint64_t>(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(p)));
      if (type == "f32") v = *reinterpret_cast<const uint32_t*>(p);
      if (type == "s64" || type == "f64") v = *reinterpret_cast<const uint64_t*>(p);
      set(v);
    } else if (op.rfind("st.global.", 0) == 0) {
      char* p = reinterpret_cast<char*>(addr(a[0]));
      const uint64_t v = val(a[1]);
      const size_t size = (type == "u8" || type == "s8")     ? 1
                          : (type == "u16" || type == "b16") ? 2
                          : (type == "s32" || type == "f32") ? 4
                                                             : 8;
      std::memcpy(p, &v, size);  // little-endian: the low bytes
    } else if (op == "cvt.rn.f32.f64") {
      set(F32Bits(static_cast<float>(AsF64(val(a[1])))));
    } else if (op == "cvt.rn.f64.s64") {
      set(F64Bits(static_cast<double>(static_cast<int64_t>(val(a[1])))));
    } else if (op == "cvt.rzi.s64.f64") {  // truncates, saturates, NaN is 0 (PTX ISA, cvt)
      const double d = AsF64(val(a[1]));
      int64_t r = std::isnan(d) ? 0
                  : d >= 0x1p63 ? std::numeric_limits<int64_t>::max()
                  : d < -0x1p63 ? std::numeric_limits<int64_t>::min()
                                : static_cast<int64_t>(d);
      set(static_cast<uint64_t>(r));
    } else if (op == "cvt.f32.f16") {
      set(F32Bits(HalfToFloat(static_cast<uint16_t>(val(a[1])))));
    } else if (op == "cvt.rn.f16.f32") {
      set(FloatToHalf(AsF32(val(a[1]))));
    } else if (op == "mul.rn.f32") {
      set(F32Bits(AsF32(val(a[1])) * AsF32(val(a[2]))));
    } else if (op == "mul.rn.f64") {
      set(F64Bits(AsF64(val(a[1])) * AsF64(val(a[2]))));
    } else {
      ADD_FAILURE() << "the interpreter has no " << op;
      return;
    }
  }
}

// The kernel over a grid of `blocks` x `threads`, as cudaLaunchKernel would run it.
void Launch(const Kernel& k, void* dst, const void* src, uint64_t count, double factor,
            int64_t divisor, uint32_t blocks, uint32_t threads) {
  const uint64_t bits[] = {reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src),
                           count, F64Bits(factor), static_cast<uint64_t>(divisor)};
  std::map<std::string, uint64_t> params;
  for (size_t i = 0; i < k.params.size(); ++i) params[k.params[i]] = bits[i];
  for (uint32_t b = 0; b < blocks; ++b)
    for (uint32_t t = 0; t < threads; ++t) RunThread(k, params, b, threads, t, blocks);
}

// The kernel's contract, from the CPU path's own functions.
std::vector<char> Reference(std::vector<char> v, DataType t, size_t n, double factor,
                            int64_t divisor) {
  ScaleInPlace(v.data(), n, t, factor);
  if (!IsFloating(t) && divisor > 1) DivideIntegers(v.data(), n, t, divisor);
  return v;
}

// Random bit patterns (every NaN, infinity, subnormal and extreme turns up) and the edges.
std::vector<char> Values(DataType t, size_t n, std::mt19937_64* rng) {
  const size_t size = DataTypeSize(t);
  std::vector<char> v(n * size);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = (*rng)();
    if (i % 7 == 3) bits = 0;                   // zero
    if (i % 11 == 5) bits = ~uint64_t{0} >> 1;  // the positive maximum of an integer type
    std::memcpy(v.data() + i * size, &bits, size);
  }
  if (t == DataType::FLOAT32 && n > 2) {
    const float special[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f, 1e-40f};
    std::memcpy(v.data(), special, sizeof(special) > v.size() ? v.size() : sizeof(special));
  }
  return v;
}

TEST(ScalePtx, EveryKernelMatchesTheCpuPath) {
  const std::map<std::string, Kernel> kernels = Parse(ScaleKernelsPtx());
  std::mt19937_64 rng(55);
  const double factors[] = {1.0, 0.5, 3.0, -2.5, 1e-3, 0.0, 1e30, -1e300};
  for (DataType t : kScaled) {
    ASSERT_TRUE(kernels.count(ScaleKernelName(t))) << DataTypeName(t);
    const Kernel& k = kernels.at(ScaleKernelName(t));
    ASSERT_EQ(k.params.size(), 5u);
    const size_t size = DataTypeSize(t);
    for (size_t n : {1, 31, 37, 100})
      for (double factor : factors)
        for (int64_t divisor : {1, 3, 8}) {
          const std::vector<char> src = Values(t, n, &rng);
          const std::vector<char> want = Reference(src, t, n, factor, divisor);
          const uint32_t grids[][2] = {{1, 1}, {3, 4}, {2, 32}};
          for (const auto& g : grids)
            for (char sentinel : {'\xa5', '\x5a'}) {
              // Out of place, with guard elements past the count that must stay as they are.
              std::vector<char> dst((n + 4) * size, sentinel);
              Launch(k, dst.data(), src.data(), n, factor, divisor, g[0], g[1]);
              ASSERT_EQ(std::vector<char>(dst.begin(), dst.begin() + n * size), want)
                  << DataTypeName(t) << " n " << n << " factor " << factor << " divisor " << divisor
                  << " grid " << g[0] << "x" << g[1];
              for (size_t b = n * size; b < dst.size(); ++b) ASSERT_EQ(dst[b], sentinel);
            }
          std::vector<char> inplace = src;  // in place
          Launch(k, inplace.data(), inplace.data(), n, factor, divisor, 2, 8);
          ASSERT_EQ(inplace, want) << DataTypeName(t) << " in place, n " << n;
        }
  }
}

TEST(ScalePtx, SaturatesAndTruncatesLikeTheCpuPath) {
  const std::map<std::string, Kernel> kernels = Parse(ScaleKernelsPtx());
  const int64_t big = (int64_t{1} << 62) + 1;  // not a double: the factor 1 must leave it exact
  const int64_t in[] = {0,
                        big,
                        -big,
                        7,
                        -7,
                        100,
                        -100,
                        std::numeric_limits<int64_t>::max(),
                        std::numeric_limits<int64_t>::min()};
  const size_t n = sizeof(in) / sizeof(in[0]);
  const double inf = std::numeric_limits<double>::infinity();
  for (DataType t : {DataType::UINT8, DataType::INT8, DataType::INT32, DataType::INT64}) {
    const size_t size = DataTypeSize(t);
    std::vector<char> src(n * size);
    for (size_t i = 0; i < n; ++i) std::memcpy(src.data() + i * size, &in[i], size);  // low bytes
    for (double factor : {1.0, 0.5, 4.0, -3.0, 1e300, inf, -inf, std::nan("")})
      for (int64_t divisor : {1, 2}) {
        std::vector<char> dst(src.size());
        Launch(kernels.at(ScaleKernelName(t)), dst.data(), src.data(), n, factor, divisor, 1, 2);
        EXPECT_EQ(dst, Reference(src, t, n, factor, divisor))
            << DataTypeName(t) << " factor " << factor << " divisor " << divisor;
      }
  }
}

}  // namespace
}  // namespace hvd
