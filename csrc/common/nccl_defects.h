// Known NCCL defects that touch the calls the GPU path makes, by the version of the library
// loaded at run time (ncclGetVersion of the loaded libnccl, not the header's: a user may install
// over another NCCL, e.g. torch's own wheel), and how reductions avoid them. One table, in
// nccl_defects.cc. No CUDA or NCCL here: the CPU build, its unit tests and the frontends'
// build_info() read it too (a frontend may include only common/ and engine/engine.h).
#pragma once

#include <string>
#include <vector>

#include "common/common.h"

namespace hvd {

// What a defect breaks, in the terms the GPU path chooses between.
enum class NcclBroken {
  kPreMulSum,       // pre-multiplied sums, and ncclAvg on floating types (NCCL runs it as one)
  kIntegerAverage,  // ncclAvg on integer types (NCCL sums, then divides)
};

struct NcclDefect {
  int first;           // first affected version code (ncclGetVersion: 21901 is 2.19.1)
  int fixed;           // first version without it
  NcclBroken broken;   // what it breaks
  int max_ranks;       // communicators of at most this many ranks (0: any size)
  const char* what;    // the defect, in a sentence
  const char* avoid;   // what Horovod does instead
  const char* source;  // where it is confirmed
};

// Every table entry whose range holds `version` (0, no NCCL: none).
std::vector<NcclDefect> NcclDefects(int version);
// Whether a defect of the loaded `version` breaks `what` on a communicator of `ranks` ranks.
bool NcclBrokenFor(int version, int ranks, NcclBroken what);
// One line per defect of `version`: build_info()["nccl_defects"], --check-build, the init log.
std::vector<std::string> NcclDefectNotes(int version);
// 22705 -> "2.27.5"; codes before 2.9 had one digit less for the minor version (2708: 2.7.8).
std::string NcclVersionName(int code);

// How the GPU path runs one reduction (allreduce, reducescatter), as the CPU path computes it:
// `pre` multiplies this rank's input before the reduction (integers: each share truncated), the
// reduction runs, then `post` multiplies the result and integers are divided by `divisor`
// (truncating; Average). A one-rank communicator never reaches NCCL's reductions (NCCL's
// one-rank kernel is the one with defects; a copy and our own scaling are all it needs). Scaling
// NCCL does itself (ncclAvg, a pre-multiplied sum) is used only where no defect of the loaded
// version touches it; everything else is our own kernel on the device.
struct ReducePlan {
  bool nccl = true;             // false: no NCCL call; the input is copied (and scaled)
  ReduceOp op = ReduceOp::SUM;  // NCCL's reduction; AVERAGE only as ncclAvg itself
  double nccl_scale = 1.0;      // != 1: NCCL's pre-multiplied sum by this (op SUM, floating)
  double pre = 1.0;             // our scaling of the input first (1: none)
  double post = 1.0;            // our scaling of the result (floats: the Average folded in)
  int64_t divisor = 1;          // integers: the scaled result then divided (Average)
  bool OwnScaling() const { return pre != 1.0 || post != 1.0 || divisor != 1; }
};
// `average_by`: what Average divides by (the set's size, or its contributors after a join).
ReducePlan PlanReduction(int nccl_version, int ranks, DataType dtype, ReduceOp op, double prescale,
                         double postscale, int average_by);
// The same, given what is broken instead of a version (the tests cover paths no entry takes yet).
struct NcclBrokenSet {
  bool premul_sum = false;       // NcclBroken::kPreMulSum on this communicator
  bool integer_average = false;  // NcclBroken::kIntegerAverage on this communicator
};
ReducePlan PlanReduction(NcclBrokenSet broken, int ranks, DataType dtype, ReduceOp op,
                         double prescale, double postscale, int average_by);

}  // namespace hvd
