// GPU allreduce: one ncclAllReduce over the whole (fused) buffer. NCCL picks ring or tree by
// size and topology; its ring moves 2(n-1)/n of the buffer per rank, like our CPU ring.
// Average and the scale factors cost no extra pass where the ReducePlan (common/nccl_defects.h)
// lets NCCL scale: ncclAvg, or a pre-multiplied sum (NcclReduction) that scales each input as it
// is reduced. Elsewhere (one rank, a defect of the loaded NCCL, integer factors) the caller
// scales with its own kernel around a plain reduction (nccl_scale.cc).
#include "ops/nccl_collectives.h"

namespace hvd {

Status NcclAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                     double scale, NcclComm* c, cudaStream_t stream, const std::string& tensor) {
  NcclReduce red;
  Status s = NcclReduction(dtype, op, scale, c, &red, tensor);
  if (!s.ok()) return s;
  const ncclResult_t rc = ncclAllReduce(src, dst, count, red.type, red.op, c->comm, stream);
  NcclReleaseOp(red, c);
  HVD_NCCL_RESULT(rc, "ncclAllReduce", tensor);
  return Status();
}

}  // namespace hvd
