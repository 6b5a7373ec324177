// CUDA side of the GPU interface (GPU builds only): versions, device checks, and the ready
// event that orders the engine's work after the framework's stream.
#include "engine/gpu_context.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "common/logging.h"
#include "common/nccl_defects.h"

namespace hvd {
namespace {

std::string HostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

void GetGpuBuildInfo(LinkedLibraries* info) {
  ncclGetVersion(&info->nccl_version);
  cudaRuntimeGetVersion(&info->cuda_runtime_version);
}

void LogGpuLibraries() {
  static std::once_flag once;
  std::call_once(once, [] {
    int version = 0;
    const ncclResult_t rc = ncclGetVersion(&version);
    if (rc != ncclSuccess) {
      HVD_LOG(WARNING, "ncclGetVersion failed: " << ncclGetErrorString(rc));
      return;
    }
    // The file the dynamic linker resolved NCCL to: another package's libnccl.so.2 found first
    // on the library path is the usual way an older NCCL gets in.
    Dl_info where;
    const bool found =
        dladdr(reinterpret_cast<void*>(&ncclGetVersion), &where) != 0 && where.dli_fname != nullptr;
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    HVD_LOG(INFO, "NCCL " << NcclVersionName(version) << " loaded"
                          << (found ? std::string(" from ") + where.dli_fname : std::string())
                          << " (the build's header: " << NcclVersionName(NCCL_VERSION_CODE)
                          << "), CUDA runtime " << runtime / 1000 << "." << runtime % 1000 / 10);
    for (const std::string& note : NcclDefectNotes(version)) HVD_LOG(WARNING, note);
  });
}

Status GpuDeviceCount(int* count) {
  *count = 0;
  const cudaError_t rc = cudaGetDeviceCount(count);
  if (rc == cudaSuccess && *count > 0) return Status();
  const char* visible = std::getenv("NVIDIA_VISIBLE_DEVICES");
  const char* cuda_visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string why = rc == cudaSuccess ? "CUDA reports 0 devices"
                                      : std::string("CUDA says ") + cudaGetErrorName(rc) + ": " +
                                            cudaGetErrorString(rc);
  *count = 0;
  return Status::InvalidArgument(
      "no GPU visible on host " + HostName() + " (" + why +
      "; NVIDIA_VISIBLE_DEVICES=" + (visible ? visible : "unset") +
      ", CUDA_VISIBLE_DEVICES=" + (cuda_visible ? cuda_visible : "unset") +
      "). In a container, start it with `--gpus all` (needs the NVIDIA Container Toolkit on the "
      "host); "
      "on the host, `nvidia-smi` must list the GPUs.");
}

Status GpuAllocate(int device, size_t bytes, void** data) {
  *data = nullptr;
  cudaError_t rc = cudaSetDevice(device);
  if (rc == cudaSuccess) rc = cudaMalloc(data, bytes ? bytes : 1);
  if (rc == cudaSuccess) return Status();
  cudaGetLastError();
  return Status::Internal("cannot allocate " + std::to_string(bytes) + " bytes on GPU " +
                          std::to_string(device) + ": " + cudaGetErrorName(rc) + " (" +
                          cudaGetErrorString(rc) + ")");
}

void GpuFree(int device, void* data) {
  if (!data) return;
  int current = -1;
  cudaGetDevice(&current);
  cudaSetDevice(device);
  cudaFree(data);
  if (current >= 0) cudaSetDevice(current);  // the caller's thread keeps its device
}

std::string PrepareGpuEntry(TensorEntry* e) {
  const std::string& name = e->request.name;
  int count = 0;
  Status s = GpuDeviceCount(&count);
  const std::string where = e->device >= 0 ? "on GPU " + std::to_string(e->device) : "on a GPU";
  if (!s.ok()) return "tensor '" + name + "' is " + where + " but " + s.message();
  // A frontend that could not tell the device (a __cuda_array_interface__ alone): the pointer's.
  if (e->device < 0 && e->input) {
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, e->input) == cudaSuccess &&
        attr.type == cudaMemoryTypeDevice)
      e->device = attr.device;
    cudaGetLastError();
  }
  if (e->device < 0) return "tensor '" + name + "' is not in any GPU's memory";
  if (e->device >= count)
    return "tensor '" + name + "' is on GPU " + std::to_string(e->device) +
           ", but this process sees " + std::to_string(count) + " GPU(s)";
  // A buffer that is not this device's memory would crash inside NCCL: refuse it by name.
  if (e->input) {
    cudaPointerAttributes attr;
    const cudaError_t prc = cudaPointerGetAttributes(&attr, e->input);
    if (prc != cudaSuccess || attr.type == cudaMemoryTypeHost ||
        attr.type == cudaMemoryTypeUnregistered || attr.device != e->device) {
      cudaGetLastError();  // clear the sticky error of a failed query
      return "tensor '" + name + "' is not in GPU " + std::to_string(e->device) + "'s memory";
    }
  }
  cudaError_t rc = cudaSetDevice(e->device);
  cudaEvent_t ev = nullptr;
  if (rc == cudaSuccess) rc = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (rc == cudaSuccess) rc = cudaEventRecord(ev, static_cast<cudaStream_t>(e->stream));
  if (rc != cudaSuccess) {
    if (ev) cudaEventDestroy(ev);
    return "tensor '" + name + "': CUDA error recording its ready event on GPU " +
           std::to_string(e->device) + ": " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) +
           ")";
  }
  e->ready =
      std::shared_ptr<void>(ev, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  return "";
}

}  // namespace hvd
