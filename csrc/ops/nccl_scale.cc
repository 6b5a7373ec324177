// Our own scaling on the device, for reductions NCCL must not scale (a one-rank communicator,
// a defect of the loaded NCCL, integer factors): the PTX of gpu_scale_ptx.h, loaded once per
// process through the runtime's library API (context-independent) and compiled by the driver for
// each device on first use. Where that fails (an old runtime, a driver without its PTX compiler)
// the caller scales in host memory instead and says why once.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>

#include "ops/gpu_scale_ptx.h"
#include "ops/nccl_collectives.h"

namespace hvd {
namespace {

struct ScaleKernels {
  std::mutex mu;
  bool tried = false;
  std::string why;                           // non-empty: the module could not be loaded at all
  std::map<DataType, const void*> by_dtype;  // cudaKernel_t handles, as cudaLaunchKernel takes them
  std::map<int, std::string> device_why;     // per device: "" once compiled for it
};

// Never freed: at process exit the CUDA runtime may already be gone.
ScaleKernels& Kernels() {
  static ScaleKernels* k = new ScaleKernels();
  return *k;
}

std::string CudaWhy(const char* call, cudaError_t rc) {
  return std::string(call) + " failed: " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) +
         ")";
}

const DataType kScaled[] = {DataType::UINT8,   DataType::INT8,    DataType::INT32,
                            DataType::INT64,   DataType::FLOAT16, DataType::BFLOAT16,
                            DataType::FLOAT32, DataType::FLOAT64};

void Load(ScaleKernels* k) {
#if CUDART_VERSION >= 12050
  static const std::string ptx = ScaleKernelsPtx();
  char log[4096] = {0};
  cudaJitOption options[] = {cudaJitErrorLogBuffer, cudaJitErrorLogBufferSizeBytes};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
  cudaLibrary_t lib = nullptr;
  cudaError_t rc = cudaLibraryLoadData(&lib, ptx.c_str(), options, values, 2, nullptr, nullptr, 0);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    k->why = CudaWhy("cudaLibraryLoadData", rc) + (log[0] ? std::string(": ") + log : "");
    return;
  }
  for (DataType t : kScaled) {
    cudaKernel_t kernel = nullptr;
    rc = cudaLibraryGetKernel(&kernel, lib, ScaleKernelName(t));
    if (rc != cudaSuccess) {
      cudaGetLastError();
      k->why = CudaWhy("cudaLibraryGetKernel", rc) + " for " + ScaleKernelName(t);
      k->by_dtype.clear();
      return;
    }
    k->by_dtype[t] = reinterpret_cast<const void*>(kernel);
  }
#else
  k->why = "the engine was built with CUDA runtime " + std::to_string(CUDART_VERSION) +
           ", which cannot load kernels at run time (cudaLibraryLoadData needs 12.5)";
#endif
}

}  // namespace

bool DeviceScaleAvailable(int device, std::string* why) {
  ScaleKernels& k = Kernels();
  std::lock_guard<std::mutex> lk(k.mu);
  if (!k.tried) {
    k.tried = true;
    Load(&k);
  }
  if (!k.why.empty()) {
    *why = k.why;
    return false;
  }
  auto it = k.device_why.find(device);
  if (it == k.device_why.end()) {
    // Compile for this device now, on the caller's current device (lazy loading would do it at
    // the first launch, where a failure would look like the op's own error).
    std::string failed;
    for (const auto& kv : k.by_dtype) {
      cudaFuncAttributes attr;
      const cudaError_t rc = cudaFuncGetAttributes(&attr, kv.second);
      if (rc != cudaSuccess) {
        cudaGetLastError();
        failed = CudaWhy("cudaFuncGetAttributes", rc) + " compiling " + ScaleKernelName(kv.first) +
                 " for GPU " + std::to_string(device);
        break;
      }
    }
    it = k.device_why.emplace(device, failed).first;
  }
  *why = it->second;
  return it->second.empty();
}

Status DeviceScale(void* dst, const void* src, size_t count, DataType dtype, double factor,
                   int64_t divisor, cudaStream_t stream, const std::string& tensor) {
  if (count == 0) return Status();
  if (factor == 1.0 && (IsFloating(dtype) || divisor <= 1)) {
    if (dst != src)
      HVD_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, count * DataTypeSize(dtype), cudaMemcpyDeviceToDevice, stream),
          tensor);
    return Status();
  }
  const void* kernel = nullptr;
  {
    ScaleKernels& k = Kernels();
    std::lock_guard<std::mutex> lk(k.mu);
    auto it = k.by_dtype.find(dtype);
    if (it != k.by_dtype.end()) kernel = it->second;
  }
  if (!kernel)
    return Status::Internal("tensor '" + tensor + "': no device scaling kernel for " +
                            DataTypeName(dtype));
  // The kernel's parameters, in its PTX order and types (u64, u64, u64, f64, s64).
  uint64_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  uint64_t n = count;
  void* args[] = {&d, &s, &n, &factor, &divisor};
  // A grid-stride loop: enough blocks to fill any GPU, each thread then walks the rest.
  const unsigned threads = 256;
  const size_t blocks = std::min<size_t>((count + threads - 1) / threads, 4096);
  HVD_CUDA_CHECK(
      cudaLaunchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), args, 0, stream),
      tensor);
  return Status();
}

}  // namespace hvd
