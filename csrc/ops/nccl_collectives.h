// The GPU collectives, one file each (nccl_<op>.cc), each opening with its algorithm. Internal
// to GPU builds (HOROVOD_GPU_OPERATIONS=NCCL). They only enqueue work on `stream` and return:
// the caller (engine/gpu_operations.cc) waits for completion with a bound and NCCL's async
// error check. Every NCCL and CUDA call's result goes through HVD_NCCL_CHECK / HVD_CUDA_CHECK,
// which return a Status naming the call and the tensor.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "common/common.h"
#include "transport/transport.h"

namespace hvd {

// `tensor` names the op's first tensor in the error text (a std::string in scope).
#define HVD_NCCL_CHECK(call, tensor)                           \
  do {                                                         \
    ncclResult_t nccl_rc_ = (call);                            \
    if (nccl_rc_ != ncclSuccess && nccl_rc_ != ncclInProgress) \
      return ::hvd::NcclError(#call, nccl_rc_, tensor);        \
  } while (0)
// For a result kept in a variable (a call inside a group, or one that must not return before
// cleanup): `what` names the call.
#define HVD_NCCL_RESULT(rc, what, tensor)                                                         \
  do {                                                                                            \
    if ((rc) != ncclSuccess && (rc) != ncclInProgress) return ::hvd::NcclError(what, rc, tensor); \
  } while (0)
#define HVD_CUDA_CHECK(call, tensor)                                               \
  do {                                                                             \
    cudaError_t cuda_rc_ = (call);                                                 \
    if (cuda_rc_ != cudaSuccess) return ::hvd::CudaError(#call, cuda_rc_, tensor); \
  } while (0)

Status NcclError(const char* call, ncclResult_t rc, const std::string& tensor);
Status CudaError(const char* call, cudaError_t rc, const std::string& tensor);

// One communicator per device, over the engine's ranks (nccl_comm.cc).
struct NcclComm {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1;
  int version = 0;  // ncclGetVersion() of the library loaded at run time (common/nccl_defects.h)
  std::string aborted;  // non-empty once an error aborted it: every later op fails with this
};
// Collective over `comm`: rank 0 makes the unique id, the transport broadcasts it, every rank
// joins.
// HOROVOD_NCCL_<X> variables are copied to NCCL_<X> first (unless NCCL_<X> is set).
Status NcclCommCreate(Comm& comm, int device, NcclComm* out, const std::string& tensor);
void NcclCommAbort(NcclComm* c, const std::string& why);

bool NcclType(DataType t, ncclDataType_t* out);

// nccl_allreduce.cc: src may equal dst. `op` and `scale` as a ReducePlan gives them
// (common/nccl_defects.h): `scale` != 1 multiplies every rank's input in NCCL's pre-multiplied
// sum. The plan never sends a one-rank communicator here, nor an op the loaded NCCL breaks:
// NcclReduction refuses both (an internal error, never a wrong result).
Status NcclAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                     double scale, NcclComm* c, cudaStream_t stream, const std::string& tensor);
// nccl_allgather.cc: `out` holds sum(first_dims) rows of `row_bytes`.
Status NcclAllgather(const void* in, void* out, size_t row_bytes,
                     const std::vector<int64_t>& first_dims, NcclComm* c, cudaStream_t stream,
                     const std::string& tensor);
// nccl_broadcast.cc: in place in `buf` (the root's data must already be there).
Status NcclBroadcast(void* buf, size_t bytes, int root, NcclComm* c, cudaStream_t stream,
                     const std::string& tensor);
// nccl_alltoall.cc: rows to send to and receive from each rank (already exchanged over the
// transport).
Status NcclAlltoall(const void* in, void* out, size_t row_bytes,
                    const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                    NcclComm* c, cudaStream_t stream, const std::string& tensor);
// nccl_reducescatter.cc: `rows_of[r]` rows of `row_elems` go to rank r, in rank order; this
// rank's reduced rows land in `out`.
Status NcclReducescatter(const void* src, void* out, size_t row_elems,
                         const std::vector<int64_t>& rows_of, DataType dtype, ReduceOp op,
                         double scale, NcclComm* c, cudaStream_t stream, const std::string& tensor);

// The NCCL type and reduction of a reducing collective for (dtype, op, scale): a built-in
// reduction, or a pre-multiplied sum that the caller releases with NcclReleaseOp once the call
// using it has returned. Scale != 1 needs Sum or Average on a floating type. ncclAvg and
// pre-multiplied sums are refused where a known defect of the loaded NCCL breaks them.
struct NcclReduce {
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  bool custom = false;
};
Status NcclReduction(DataType dtype, ReduceOp op, double scale, NcclComm* c, NcclReduce* out,
                     const std::string& tensor);
void NcclReleaseOp(const NcclReduce& r, NcclComm* c);

// nccl_scale.cc: our own scaling on the device (the PTX kernels of ops/gpu_scale_ptx.h):
// dst[i] = src[i] * factor, integers then divided by `divisor` (truncating), src may be dst;
// a plain copy (or nothing) when there is nothing to scale. Enqueued on `stream`.
// DeviceScaleAvailable loads the kernels for `device` (the current one) on first use; false,
// with the reason, where the runtime or driver cannot: the caller then scales in host memory.
bool DeviceScaleAvailable(int device, std::string* why);
Status DeviceScale(void* dst, const void* src, size_t count, DataType dtype, double factor,
                   int64_t divisor, cudaStream_t stream, const std::string& tensor);

}  // namespace hvd
