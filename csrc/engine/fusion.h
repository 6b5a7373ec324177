// Tensor fusion: ready allreduces of one kind are grouped into one response (controller), and
// a group's tensors are packed into one buffer for a single collective and unpacked after it
// (operations). Pure functions over responses and entries, so they are tested without MPI.
#pragma once

#include <cstdint>
#include <vector>

#include "common/message.h"
#include "engine/tensor_queue.h"

namespace hvd {

// Groups allreduce responses with equal OpSpecs, at most `threshold` bytes per group (next
// fit, in order); other responses and errors pass through where they were. threshold <= 0
// disables fusion. Deterministic: every rank fusing the same list gets the same groups.
std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold);
// The same over responses read in place (the response cache's, on the fast path): a group
// copies its first response and only the name and count of the others, not every response
// whole. contributors >= 0 replaces every response's own (ranks that have joined).
std::vector<Response> FuseCachedResponses(const std::vector<const Response*>& responses,
                                          int64_t threshold, int32_t contributors = -1);

// Copies each entry's input (num_elements[i] elements of dtype) into `buf`, one after the other.
// widen: the elements go in as int64 (an integer Average reduces in int64; AveragesWidened).
void PackFusionBuffer(const std::vector<TensorEntry>& entries,
                      const std::vector<int64_t>& num_elements, DataType dtype, bool widen,
                      void* buf);
// The reverse: each entry's output from its place in `buf` (narrowed back from int64 if widen).
void UnpackFusionBuffer(const void* buf, const std::vector<int64_t>& num_elements, DataType dtype,
                        bool widen, const std::vector<TensorEntry>& entries);

}  // namespace hvd
