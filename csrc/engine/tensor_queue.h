// Where frontends hand tensors to the engine: a table of in-flight entries keyed by name plus
// the queue of requests the background thread has not negotiated yet. Adding work wakes the
// background thread at once instead of letting it sleep out the cycle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/common.h"
#include "common/message.h"

namespace hvd {

// Allocates the output of an op whose size is known only after negotiation (allgather,
// alltoall, reducescatter). Called on the background thread.
using OutputAllocator = std::function<Status(const std::vector<int64_t>& shape, void** data)>;
using DoneCallback = std::function<void(const Status&)>;

struct TensorEntry {
  Request request;              // name, op, dtype, shape, ...
  const void* input = nullptr;  // request.shape elements of request.dtype
  void* output = nullptr;       // preallocated output (allreduce, broadcast); may equal input
  OutputAllocator allocate_output;
  DoneCallback done;
  std::vector<int64_t>* received_splits = nullptr;  // alltoall: filled before done()
  int64_t enqueued_us = 0;
  // GPU tensors (request.gpu): the CUDA device of input and output, and the framework's stream
  // (a cudaStream_t) whose queued work produces the input and may still use memory the engine
  // allocates. `ready` is the CUDA event recorded on that stream at Enqueue (gpu_context.h):
  // the engine's stream waits for it, so the input is complete before NCCL reads it.
  int device = -1;
  void* stream = nullptr;
  std::shared_ptr<void> ready;
};

class TensorQueue {
 public:
  // All-or-nothing: a duplicate in-flight name rejects the whole group.
  Status Add(std::vector<TensorEntry> entries);
  // Blocks until new work arrives, `wake_requested` is set, or the deadline passes. Polls
  // first until `spin_until_us` (no sleep: a blocked thread's wake-up costs tens of us on a VM).
  void WaitForWork(int64_t deadline_us, int64_t spin_until_us = 0);
  void Wake();
  std::vector<Request> PopNewRequests();
  bool Take(const std::string& name, TensorEntry* out);
  const TensorEntry* Peek(const std::string& name);  // background thread only
  // Fails every entry (queued or negotiating) and refuses new ones with `status`.
  void FailAll(const Status& status);
  size_t InFlight();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, TensorEntry> table_;
  std::vector<Request> new_requests_;
  bool wake_ = false;
  std::atomic<bool> wake_hint_{false};  // wake_, readable without mu_ while polling
  bool closed_ = false;
  Status closed_status_;
};

}  // namespace hvd
