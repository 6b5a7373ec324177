// The frontend's handles (one per call: a tensor or a group), shared by the NumPy bindings
// (module.cc) and the device-array bindings (device.cc), and the waiting on them (handles.cc).
// Python objects in a Slot are touched only with the GIL held; done() runs on the engine's
// background thread and touches none.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/host_blocks.h"
#include "engine/engine.h"

namespace hvd_py {

namespace py = pybind11;
using hvd::DataType;
using hvd::DoneCallback;
using hvd::GpuFree;
using hvd::Status;
using hvd::TensorEntry;

// One frontend call: a single tensor, or a group queued atomically (grouped_allreduce).
struct Slot {
  std::string name;
  py::object input, output;  // touched only with the GIL held
  py::dtype dtype;
  void* owned = nullptr;   // engine-allocated output (allgather, alltoall, reducescatter)
  size_t owned_bytes = 0;  // host memory: the kept host block's size (hvd::TakeHostBlock)
  std::vector<int64_t> owned_shape;
  std::vector<int64_t> received_splits;
  int device = -1;  // >= 0: a device array (`owned` is then device memory, hvd::GpuAllocate)
  DataType engine_dtype = DataType::UINT8;
};

struct Handle {
  int64_t id = 0;
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;
  std::atomic<bool> finished{false};  // pending reached 0: polled by Wait before it blocks
  bool abandoned = false;  // guarded by mu: Python dropped it, done() queues it for reaping
  bool waiting = false;    // guarded by the GIL: a thread is inside Wait()
  Status status;           // the first error of the group
  // This rank could not hand an input over (its dtype): the op was negotiated as invalid so the
  // other ranks fail too, and Wait raises this rank's own message, as it did before it waited.
  std::string refused;
  // A grouped call of no tensors, negotiated as one empty marker (module.cc): Wait returns [].
  bool empty_group = false;
  std::vector<Slot> slots;
  ~Handle() {
    for (auto& s : slots) {
      if (s.device >= 0)
        GpuFree(s.device, s.owned);
      else
        hvd::KeepHostBlock({s.owned, s.owned_bytes});
    }
  }
};

extern std::mutex g_handles_mu;  // guards the three below; never held while Python objects die
extern std::unordered_map<int64_t, std::shared_ptr<Handle>>& g_handles;
extern int64_t g_next_handle;
extern std::vector<int64_t> g_reap;  // abandoned handles whose ops have finished

// Frees the handles queued by done(); with the GIL, at the start of every handle call.
void ReapAbandoned();
// Raises `s` as Python sees it: one of horovod.common.exceptions (HorovodInvalidArgumentError,
// a ValueError, for invalid arguments).
[[noreturn]] void Raise(const Status& s);
// The entry's completion: counts the handle down; touches no Python object.
DoneCallback MakeDone(Handle* hp);
// Registers the handle and queues its entries; returns its id or raises Enqueue's error.
int64_t Submit(const std::shared_ptr<Handle>& h, std::vector<TensorEntry> entries, int process_set);

// True once every op of handle `id` has finished (raises ValueError for an unknown id).
bool Poll(int64_t id);
// Waits for every op of the handle (timeout_s < 0: no limit), checking for Ctrl-C every
// 100 ms. Returns [(output, received_splits)] per tensor; raises the first error. The handle
// is released either way, except on timeout.
py::list Wait(int64_t id, double timeout_s);
// Python collected a handle it never synchronized: free it now if its ops are done, else once
// done() queues it. Unknown ids (already synchronized or released) are ignored.
void Release(int64_t id);

// The arguments of a call of n tensors as enqueue, enqueue_wait and enqueue_device take them.
// `names`: the op's name (a str: its tensors are named by hvd::MemberName; `group`, if given,
// must be that name and makes it a grouped op) or a list of one name per tensor, used as given
// (a grouped op's members then carry `group`). Raises ValueError if neither fits.
hvd::OpArgs ReadOpArgs(int op_type, const py::object& names, size_t n, int reduce_op, int root,
                       double prescale, double postscale, const std::vector<int64_t>& splits,
                       const std::string& invalid, const std::string& group);

// device.cc: the ops on device arrays (horovod/common/device.py describes them).
int64_t EnqueueDevice(int op_type, const py::object& names, const py::list& inputs,
                      const py::list& outputs, int reduce_op, int root, double prescale,
                      double postscale, const std::vector<int64_t>& splits,
                      const std::string& invalid, const std::string& group, int process_set);

}  // namespace hvd_py
