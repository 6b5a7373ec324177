// The GPU interface of a build without GPU operations (HOROVOD_GPU_OPERATIONS unset): GPU
// tensors are refused by name, on every rank, with the way to get a GPU build.
#include "engine/gpu_context.h"

namespace hvd {

void GetGpuBuildInfo(LinkedLibraries*) {}  // no GPU libraries linked: the versions stay 0

void LogGpuLibraries() {}  // nothing loaded to name

Status GpuDeviceCount(int* count) {
  *count = 0;
  return Status::InvalidArgument(
      "no GPU support in this build of Horovod: it was compiled without "
      "HOROVOD_GPU_OPERATIONS=NCCL "
      "(use the GPU image, horovod:latest-gpu, or rebuild with HOROVOD_GPU_OPERATIONS=NCCL)");
}

Status GpuAllocate(int, size_t, void** data) {
  *data = nullptr;
  int n = 0;
  return GpuDeviceCount(&n);
}

void GpuFree(int, void*) {}

std::string PrepareGpuEntry(TensorEntry* entry) {
  return "tensor '" + entry->request.name +
         "' is in GPU memory but this build of Horovod has no GPU "
         "operations (rebuild with HOROVOD_GPU_OPERATIONS=NCCL, or use the GPU image)";
}

std::unique_ptr<GpuOperations> MakeGpuOperations(Transport*, Timeline*) { return nullptr; }

}  // namespace hvd
