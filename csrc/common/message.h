// What ranks tell the coordinator (Request) and what it answers (Response), with a compact
// binary encoding for the gather/broadcast of the negotiation slow path.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "common/common.h"

namespace hvd {

// What identifies an op apart from its tensor's name and shape: every rank must submit the
// same spec (the controller checks each field and names the ranks that differ), a response
// carries it, fusion groups allreduces with equal specs, and it crosses the wire as one unit.
// Shape is not part of it: a fused response holds tensors of many shapes (num_elements), and
// allgather/alltoall ranks legitimately differ in the first dimension.
// Adding a field: declare it and list it in Fields(); copies, comparison (the response cache's
// test, fusion's key) and the wire encoding follow. If ranks must agree on it, its mismatch
// message goes with the others in ResponseFromRequests (engine/request_checks.cc).
struct OpSpec {
  OpType type = OpType::ALLREDUCE;
  DataType dtype = DataType::FLOAT32;
  ReduceOp reduce_op = ReduceOp::SUM;
  int32_t root = 0;
  double prescale = 1.0, postscale = 1.0;
  // The tensor is in GPU memory (each rank its own device): ranks must agree, and GPU tensors
  // run through NCCL, never fused with host tensors.
  bool gpu = false;

  // Every field, in wire order, as a tuple of references (const or not, as `s` is).
  template <typename S>
  static auto Fields(S& s) {
    return std::tie(s.type, s.dtype, s.reduce_op, s.root, s.prescale, s.postscale, s.gpu);
  }
  OpSpec& spec() { return *this; }
  const OpSpec& spec() const { return *this; }
  bool operator==(const OpSpec& o) const { return Fields(*this) == Fields(o); }
  bool operator!=(const OpSpec& o) const { return !(*this == o); }
  bool operator<(const OpSpec& o) const { return Fields(*this) < Fields(o); }  // fusion's map key
};

// Why a spec that every rank agrees on still cannot run, or "": a reduction (allreduce,
// reducescatter) of bool, or a GPU reduction of a 16-bit integer (NCCL has
// no such type), or Adasum other than a host-memory allreduce of a floating dtype over a
// power-of-two number of `ranks` (0: not checked). The controller checks it at negotiation, so
// every rank fails alike; the GPU operations check it again before building an NCCL reduction.
// The text names the op, the dtype and the factors; the caller names the tensor.
std::string UnsupportedReduction(const OpSpec& spec, int ranks = 0);

// Request and Response are an OpSpec plus what belongs to one rank or one tensor, so r.dtype
// reads as before and r.spec() is the whole spec.
struct Request : OpSpec {
  int32_t rank = 0;
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall only: rows sent to each rank (local, not compared)
  // Non-empty: this rank's arguments failed local validation (bad root, splits, shape), or
  // its frontend could not hand the input over (a dtype the engine lacks). The request is
  // still negotiated so that every rank fails with this text instead of waiting.
  std::string invalid;
  // Grouped ops (grouped_allreduce, a gradient tape's reduction, broadcast_variables): the
  // group's name and how many tensors this rank put in it; members are "<group>.<index>" and
  // are enqueued together. group_size 0: not in a group. Ranks must agree on the size (the
  // controller names each rank's count), and a member that fails fails its whole group on
  // every rank, so that no rank waits for members that only it submitted.
  std::string group;
  int32_t group_size = 0;

  // Same op, same parameters: the test behind the response-cache fast path.
  bool SameParams(const Request& o) const;
};

struct Response : OpSpec {
  std::vector<std::string> names;          // >1 only for a fused allreduce
  std::vector<int64_t> num_elements;       // per name, for fusion sizing
  std::vector<int64_t> first_dims;         // allgather: first dimension of every rank
  std::string error;                       // non-empty: the op fails on every rank with this text
  bool error_is_invalid_argument = false;  // a rank's bad arguments (else ranks disagree)
  // Allreduce: how many ranks contributed; 0 = all. Fewer while ranks have joined (hvd.join):
  // they add zeros, and Average divides by this. JOIN: `root` is the last rank to join.
  int32_t contributors = 0;
  // Not encoded, never cached: an eager allreduce (engine/controller.cc) came with every rank's
  // data in the negotiation round; index = rank, each num_elements[0] elements of dtype, valid
  // until the controller's next round. The operations reduce them locally in rank order.
  std::vector<const void*> eager_parts;

  int64_t TotalBytes() const;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;
};

// Settings chosen by rank 0's autotuner (HOROVOD_AUTOTUNE), sent in a response list so that
// every rank switches to them after the same round.
struct TunedParams {
  int64_t fusion_threshold = 0;  // bytes
  double cycle_time_ms = 0;
  bool final = false;  // tuning is over: these stay for the rest of the job
};

struct ResponseList {
  std::vector<Response> responses;
  std::vector<int32_t> joined;  // the ranks that have joined and wait for the others (hvd.join)
  bool has_params = false;      // `params` take effect on every rank after this round
  TunedParams params;
  bool shutdown = false;
  std::string shutdown_reason;
  // Not encoded: the shutdown came in rank 0's response list, which every rank received in this
  // round, so every rank's loop ends here. False if only this rank failed to decode it.
  bool shutdown_on_every_rank = false;
};

std::string Encode(const RequestList& l);
bool Decode(const char* data, size_t size, RequestList* l);
std::string Encode(const ResponseList& l);
bool Decode(const char* data, size_t size, ResponseList* l);

}  // namespace hvd
