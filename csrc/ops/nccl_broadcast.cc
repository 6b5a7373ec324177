// GPU broadcast: one in-place ncclBroadcast from the root (NCCL pipelines it along a ring:
// about B bytes received per rank).
#include "ops/nccl_collectives.h"

namespace hvd {

Status NcclBroadcast(void* buf, size_t bytes, int root, NcclComm* c, cudaStream_t stream,
                     const std::string& tensor) {
  HVD_NCCL_CHECK(ncclBroadcast(buf, buf, bytes, ncclUint8, root, c->comm, stream), tensor);
  return Status();
}

}  // namespace hvd
