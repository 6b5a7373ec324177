// Which GPU each rank drives, and the sentence for ranks that share one. No CUDA here, so the
// CPU build and its unit tests carry it; nccl_comm.cc fills the records and asks before NCCL
// starts (NCCL itself refuses two ranks on one GPU with "invalid usage" only).
#pragma once

#include <string>
#include <vector>

namespace hvd {

struct GpuPlacement {
  std::string host;     // the rank's host name, for the message
  std::string machine;  // the kernel's boot_id: containers on one machine share it (and its GPUs)
  std::string bus_id;   // the GPU's PCI bus id (cudaDeviceGetPCIBusId): the same GPU under any
                        // CUDA_VISIBLE_DEVICES numbering
  int device = -1;      // the CUDA device number the rank uses
};

// Empty when every rank has a GPU of its own; otherwise which ranks share which GPU on which
// host, and what to do about it. The same text on every rank (they all hold the same records).
std::string SharedGpuProblem(const std::vector<GpuPlacement>& by_rank);

}  // namespace hvd
