// What ranks tell the coordinator (Request) and what it answers (Response), with a compact
// binary encoding for the gather/broadcast of the negotiation slow path.
#pragma once

#include <string>
#include <vector>

#include "common/common.h"

namespace hvd {

struct Request {
  int32_t rank = 0;
  OpType type = OpType::ALLREDUCE;
  DataType dtype = DataType::FLOAT32;
  ReduceOp reduce_op = ReduceOp::SUM;
  int32_t root = 0;
  double prescale = 1.0, postscale = 1.0;
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall only: rows sent to each rank (local, not compared)
  // Non-empty: this rank's arguments failed local validation (bad root, splits, shape). The
  // request is still negotiated so that every rank fails with this text instead of waiting.
  std::string invalid;
  // The tensor is in GPU memory (each rank its own device): ranks must agree, and GPU tensors
  // run through NCCL, never fused with host tensors.
  bool gpu = false;

  // Same op, same parameters: the test behind the response-cache fast path.
  bool SameParams(const Request& o) const;
};

struct Response {
  OpType type = OpType::ALLREDUCE;
  DataType dtype = DataType::FLOAT32;
  ReduceOp reduce_op = ReduceOp::SUM;
  int32_t root = 0;
  double prescale = 1.0, postscale = 1.0;
  std::vector<std::string> names;    // >1 only for a fused allreduce
  std::vector<int64_t> num_elements;  // per name, for fusion sizing
  std::vector<int64_t> first_dims;    // allgather: first dimension of every rank
  std::string error;                  // non-empty: the op fails on every rank with this text
  bool error_is_invalid_argument = false;  // a rank's bad arguments (else ranks disagree)
  bool gpu = false;                        // GPU tensors: run by GpuOperations (NCCL)

  int64_t TotalBytes() const;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;
};

struct ResponseList {
  std::vector<Response> responses;
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
