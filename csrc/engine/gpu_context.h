// The engine's GPU side, behind one interface: a build with HOROVOD_GPU_OPERATIONS=NCCL
// implements it with CUDA and NCCL (gpu_context.cc, gpu_operations.cc, ops/nccl_*.cc); any
// other build links gpu_stub.cc, whose GPU entries fail by name, on every rank, saying how to
// get a GPU build. Nothing outside these files includes a CUDA or NCCL header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/common.h"
#include "common/message.h"
#include "engine/engine.h"
#include "engine/tensor_queue.h"

namespace hvd {

class Transport;
class Timeline;

// Fills the NCCL and CUDA runtime versions of `info` (engine.h); needs no GPU and no driver.
// GpuDeviceCount(), which frontends call, is declared in engine.h and defined with these.
void GetGpuBuildInfo(LinkedLibraries* info);
// Logs, once per process, the NCCL this process loaded (ncclGetVersion of the library, which
// may not be the one the build's header named) and where from, at INFO, and each known defect
// of that version (common/nccl_defects.h) as a WARNING. Called by hvd.init() and by the first GPU
// op; nothing in a build without GPU operations. Needs no GPU.
void LogGpuLibraries();

// Frontend thread, at Enqueue, for an entry with request.gpu: checks that entry->device is a
// device this process sees and records entry->ready on entry->stream. A non-empty return is the
// reason the entry cannot run; it is negotiated as invalid, so every rank fails with it.
std::string PrepareGpuEntry(TensorEntry* entry);

// Runs negotiated GPU responses on the background thread (created on the first one): one
// stream, fusion buffer and NCCL communicator per device, the communicator bootstrapped over
// MPI. Execute returns once the results are in memory, so done() fires only when they are.
class GpuOperations {
 public:
  virtual ~GpuOperations() = default;
  virtual Status Execute(const Response& response, std::vector<TensorEntry>& entries) = 0;
};
// Null in a build without GPU operations.
std::unique_ptr<GpuOperations> MakeGpuOperations(Transport* net, Timeline* timeline);

}  // namespace hvd
