// The table of known NCCL defects (nccl_defects.h) and the reduction plan that avoids them.
// An entry belongs here when it breaks a result of a call the GPU path makes (ncclAllReduce,
// ncclReduceScatter, ncclReduce, with ncclAvg or a pre-multiplied sum), with its version range
// confirmed in NCCL's sources or release notes.
#include "common/nccl_defects.h"

#include <algorithm>

namespace hvd {
namespace {

const NcclDefect kDefects[] = {
    {21901, 22907, NcclBroken::kPreMulSum, 1,
     "one-rank communicators: ncclAvg on floating types and pre-multiplied sums "
     "(ncclRedOpCreatePreMulSum) leave the last elements of the output unwritten when the "
     "count is not a multiple of NCCL's block count (e.g. the last of 17x17x17 floats)",
     "one-rank reductions never call NCCL: a copy (nothing in place) and Horovod's own scaling "
     "kernel on the device",
     "NVIDIA/nccl#1950 (pytorch/pytorch#168092), fixed in v2.29.7-1; the floor division of "
     "src/device/onerank.cu came with v2.19.1-1"},
    {21403, 21803, NcclBroken::kIntegerAverage, 0,
     "ncclAvg on integer types through the CollNet/Chain allreduce (a CollNet network plugin, "
     "e.g. SHARP) skips the final division: the result is the sum",
     "integer Average runs as a sum and Horovod's own division on the device",
     "NCCL v2.18.3-1 release notes (\"Fix Avg operation with Collnet/Chain\": the division "
     "added to src/collectives/device/all_reduce.h); CollNet/Chain came back in v2.14.3-1"},
};

}  // namespace

std::vector<NcclDefect> NcclDefects(int version) {
  std::vector<NcclDefect> out;
  if (version <= 0) return out;
  for (const NcclDefect& d : kDefects)
    if (version >= d.first && version < d.fixed) out.push_back(d);
  return out;
}

bool NcclBrokenFor(int version, int ranks, NcclBroken what) {
  for (const NcclDefect& d : NcclDefects(version))
    if (d.broken == what && (d.max_ranks == 0 || ranks <= d.max_ranks)) return true;
  return false;
}

std::string NcclVersionName(int code) {
  if (code <= 0) return "";
  const bool modern = code >= 10000;  // NCCL_VERSION_CODE's layout since 2.9
  const int major = modern ? code / 10000 : code / 1000;
  const int minor = modern ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::vector<std::string> NcclDefectNotes(int version) {
  std::vector<std::string> out;
  for (const NcclDefect& d : NcclDefects(version))
    out.push_back("NCCL " + NcclVersionName(version) + " (" + NcclVersionName(d.first) +
                  " <= version < " + NcclVersionName(d.fixed) + "): " + d.what +
                  ". Horovod avoids it: " + d.avoid + ". Source: " + d.source + ".");
  return out;
}

ReducePlan PlanReduction(int nccl_version, int ranks, DataType dtype, ReduceOp op, double prescale,
                         double postscale, int average_by) {
  NcclBrokenSet broken;
  broken.premul_sum = NcclBrokenFor(nccl_version, ranks, NcclBroken::kPreMulSum);
  broken.integer_average = NcclBrokenFor(nccl_version, ranks, NcclBroken::kIntegerAverage);
  return PlanReduction(broken, ranks, dtype, op, prescale, postscale, average_by);
}

ReducePlan PlanReduction(NcclBrokenSet broken, int ranks, DataType dtype, ReduceOp op,
                         double prescale, double postscale, int average_by) {
  ReducePlan p;
  const bool avg = op == ReduceOp::AVERAGE;
  const int64_t by = avg ? std::max(average_by, 1) : 1;
  const bool floating = IsFloating(dtype);
  // Every factor applied by our kernel, as the CPU path does (ScaleInPlace, ScaleAndAverage).
  auto own = [&](ReduceOp nccl_op) {
    p.op = nccl_op;
    p.pre = prescale;
    if (floating) {
      p.post = postscale / static_cast<double>(by);
    } else {
      p.post = postscale;
      p.divisor = by;
    }
    return p;
  };
  if (ranks <= 1) {
    p.nccl = false;
    return own(avg ? ReduceOp::SUM : op);
  }
  // Min, Max, Product: NCCL's own op; factors (rare) are ours, around it.
  if (!avg && op != ReduceOp::SUM) return own(op);
  if (!floating) {
    // NCCL's pre-multiplied sum takes its scalar in the tensor's type: no 0.5 for an integer.
    if (prescale != 1.0 || postscale != 1.0) return own(ReduceOp::SUM);
    if (!avg) return p;
    if (by != ranks || broken.integer_average) return own(ReduceOp::SUM);
    p.op = ReduceOp::AVERAGE;
    return p;
  }
  if (broken.premul_sum) return own(ReduceOp::SUM);
  // sum(a * x_r) * b / n == sum(a * b / n * x_r): one pre-multiplied sum does every factor.
  const double scale = prescale * postscale / static_cast<double>(by);
  if (avg && prescale * postscale == 1.0 && by == ranks)
    p.op = ReduceOp::AVERAGE;
  else
    p.nccl_scale = scale;
  return p;
}

}  // namespace hvd
