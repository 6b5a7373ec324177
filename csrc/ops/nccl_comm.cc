// NCCL communicators, error texts, data types and reductions shared by the nccl_*.cc files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/nccl_defects.h"
#include "common/reduce_kernels.h"
#include "ops/gpu_placement.h"
#include "ops/nccl_collectives.h"

extern char** environ;

namespace hvd {
namespace {

// HOROVOD_NCCL_<X>=v becomes NCCL_<X>=v unless NCCL_<X> is set: the knobs travel with the
// HOROVOD_ prefix that horovodrun forwards to every rank. Done once, before NCCL reads them.
void PassNcclEnvironment() {
  static bool done = false;
  if (done) return;
  done = true;
  const char prefix[] = "HOROVOD_NCCL_";
  std::vector<std::pair<std::string, std::string>> found;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, prefix, sizeof(prefix) - 1) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    const char* var = *e + 8;  // "NCCL_<X>"
    found.emplace_back(std::string(var, static_cast<size_t>(eq - var)), eq + 1);
  }
  for (const auto& kv : found) {
    if (std::getenv(kv.first.c_str())) continue;
    setenv(kv.first.c_str(), kv.second.c_str(), 0);
    HVD_LOG(DEBUG,
            "NCCL setting from HOROVOD_" << kv.first << ": " << kv.first << "=" << kv.second);
  }
}

// Every rank's GPU, gathered: two ranks on one GPU fail here on every rank, named, where NCCL
// would say "invalid usage" (or, in some versions, hang in init). Collective over `comm`;
// a rank whose bus id cannot be read still takes part (with a record that matches no other).
Status CheckOwnGpus(Comm& comm, int rank, int size, int device, const std::string& tensor) {
  struct Record {
    char host[64];
    char machine[40];
    char bus[32];
    int device;
  } mine;
  std::memset(&mine, 0, sizeof(mine));
  gethostname(mine.host, sizeof(mine.host) - 1);
  std::snprintf(mine.machine, sizeof(mine.machine), "%s", MachineId().c_str());
  if (cudaDeviceGetPCIBusId(mine.bus, sizeof(mine.bus), device) != cudaSuccess)
    std::snprintf(mine.bus, sizeof(mine.bus), "unknown-%d", rank);
  mine.device = device;
  std::vector<Record> all(static_cast<size_t>(size));
  comm.Allgather(&mine, sizeof(Record), all.data());
  std::vector<GpuPlacement> by_rank;
  for (const Record& r : all) by_rank.push_back({r.host, r.machine, r.bus, r.device});
  const std::string problem = SharedGpuProblem(by_rank);
  if (problem.empty()) return Status();
  return Status::InvalidArgument("cannot start NCCL for tensor '" + tensor + "': " + problem);
}

}  // namespace

Status NcclError(const char* call, ncclResult_t rc, const std::string& tensor) {
  std::string detail = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) detail += std::string(": ") + last;
  return Status::Internal("NCCL error in " + std::string(call) + " for tensor '" + tensor +
                          "': " + detail);
}

Status CudaError(const char* call, cudaError_t rc, const std::string& tensor) {
  return Status::Internal("CUDA error in " + std::string(call) + " for tensor '" + tensor +
                          "': " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
}

Status NcclCommCreate(Comm& comm, int device, NcclComm* out, const std::string& tensor) {
  PassNcclEnvironment();
  out->rank = comm.rank();
  out->size = comm.size();
  Status placed = CheckOwnGpus(comm, out->rank, out->size, device, tensor);
  if (!placed.ok()) return placed;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  // Rank 0's failure must still reach the others, or they would wait for an id that never
  // comes: a flag travels with the id and every rank fails with rank 0's reason.
  struct {
    ncclUniqueId id;
    int ok;
    char why[200];
  } msg;
  std::memset(&msg, 0, sizeof(msg));
  if (out->rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&msg.id);
    msg.ok = rc == ncclSuccess;
    if (!msg.ok) std::snprintf(msg.why, sizeof(msg.why), "%s", ncclGetErrorString(rc));
  }
  comm.Bcast(&msg, sizeof(msg), 0);
  if (!msg.ok)
    return Status::Internal(
        "NCCL error in ncclGetUniqueId on rank 0, creating the communicator for tensor '" + tensor +
        "': " + msg.why);
  id = msg.id;
  HVD_CUDA_CHECK(cudaSetDevice(device), tensor);
  HVD_NCCL_CHECK(ncclCommInitRank(&out->comm, out->size, id, out->rank), tensor);
  // After the collective steps: a failure here cannot leave the other ranks waiting.
  HVD_NCCL_CHECK(ncclGetVersion(&out->version), tensor);
  HVD_LOG(DEBUG, "NCCL communicator on device " << device << ": rank " << out->rank << " of "
                                                << out->size);
  return Status();
}

void NcclCommAbort(NcclComm* c, const std::string& why) {
  if (c->comm) ncclCommAbort(c->comm);
  c->comm = nullptr;
  c->aborted = why;
}

bool NcclType(DataType t, ncclDataType_t* out) {
  switch (t) {
    case DataType::UINT8: *out = ncclUint8; return true;
    case DataType::INT8: *out = ncclInt8; return true;
    case DataType::INT32: *out = ncclInt32; return true;
    case DataType::INT64: *out = ncclInt64; return true;
    case DataType::FLOAT16: *out = ncclFloat16; return true;
    case DataType::BFLOAT16: *out = ncclBfloat16; return true;
    case DataType::FLOAT32: *out = ncclFloat32; return true;
    case DataType::FLOAT64: *out = ncclFloat64; return true;
    case DataType::BOOL:
      return false;  // moved as bytes, never reduced
    // NCCL has no 16-bit integer type: moved as bytes, reductions refused at negotiation
    // (UnsupportedReduction).
    case DataType::UINT16:
    case DataType::INT16: return false;
  }
  return false;
}

Status NcclReduction(DataType dtype, ReduceOp op, double scale, NcclComm* c, NcclReduce* out,
                     const std::string& tensor) {
  out->custom = false;
  if (!NcclType(dtype, &out->type))
    return Status::InvalidArgument("tensor '" + tensor + "': no NCCL type");
  const bool avg = op == ReduceOp::AVERAGE;
  // Refused at negotiation already (UnsupportedReduction): Adasum runs on host memory only.
  if (op == ReduceOp::ADASUM)
    return Status::InvalidArgument("tensor '" + tensor + "': Adasum is not supported on GPU");
  // The reduction plan (common/nccl_defects.h) keeps these away; if a caller did not, fail by
  // name rather than hand NCCL a reduction it gets wrong.
  const bool premul = scale != 1.0 || (avg && IsFloating(dtype));
  const bool broken =
      c->size == 1 ? premul
                   : (premul && NcclBrokenFor(c->version, c->size, NcclBroken::kPreMulSum)) ||
                         (avg && !IsFloating(dtype) &&
                          NcclBrokenFor(c->version, c->size, NcclBroken::kIntegerAverage));
  if (broken)
    return Status::Internal(
        "tensor '" + tensor + "': " + ReduceOpName(op) +
        (scale != 1.0 ? " with scale factors" : "") + " on " + DataTypeName(dtype) + " over " +
        std::to_string(c->size) + " rank(s) must not reach NCCL: " +
        (c->size == 1 ? std::string("one-rank communicators never take ncclAvg or pre-multiplied "
                                    "sums (NVIDIA/nccl#1950)")
                      : "NCCL " + NcclVersionName(c->version) + " gets it wrong") +
        " (common/nccl_defects.h)");
  if (scale == 1.0) {
    switch (op) {
      case ReduceOp::SUM: out->op = ncclSum; return Status();
      // Integers: NCCL sums in the tensor's own type, then divides (truncating).
      case ReduceOp::AVERAGE: out->op = ncclAvg; return Status();
      case ReduceOp::MIN: out->op = ncclMin; return Status();
      case ReduceOp::MAX: out->op = ncclMax; return Status();
      case ReduceOp::PRODUCT: out->op = ncclProd; return Status();
      case ReduceOp::ADASUM: break;  // below
    }
  }
  // Integers with factors never get here (UnsupportedReduction, checked at negotiation and in
  // gpu_operations.cc); the floating-type test stays because the scalar below is a float.
  if (!(op == ReduceOp::SUM || avg) || !IsFloating(dtype))
    return Status::InvalidArgument("tensor '" + tensor +
                                   "': on GPU, prescale/postscale factors need op Sum or "
                                   "Average on a floating type (got " +
                                   ReduceOpName(op) + " on " + DataTypeName(dtype) + ")");
  // sum(a * x_r) * b == sum(a * b * x_r): one pre-multiplied sum does both scalings.
  const double s = avg ? scale / c->size : scale;
  union {
    double d;
    float f;
    uint16_t h;
  } scalar;
  // NCCL takes the scalar in the tensor's own type.
  if (dtype == DataType::FLOAT64)
    scalar.d = s;
  else if (dtype == DataType::FLOAT32)
    scalar.f = static_cast<float>(s);
  else if (dtype == DataType::FLOAT16)
    scalar.h = FloatToHalf(static_cast<float>(s));
  else
    scalar.h = FloatToBFloat16(static_cast<float>(s));
  HVD_NCCL_CHECK(
      ncclRedOpCreatePreMulSum(&out->op, &scalar, out->type, ncclScalarHostImmediate, c->comm),
      tensor);
  out->custom = true;
  return Status();
}

void NcclReleaseOp(const NcclReduce& r, NcclComm* c) {
  if (r.custom && c->comm) ncclRedOpDestroy(r.op, c->comm);
}

}  // namespace hvd
