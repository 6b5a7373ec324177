// The frontend's handle table, completion and waiting (handles.h).
#include "python/handles.h"

#include <pybind11/stl.h>

#include <chrono>

#include "python/dlpack.h"
#include "python/output_blocks.h"

namespace hvd_py {

std::mutex g_handles_mu;
// Never destroyed: handles left at exit hold Python objects, which must not be released after
// the interpreter has finalized.
std::unordered_map<int64_t, std::shared_ptr<Handle>>& g_handles =
    *new std::unordered_map<int64_t, std::shared_ptr<Handle>>;
int64_t g_next_handle = 1;
std::vector<int64_t> g_reap;  // abandoned handles whose ops have finished

// Frees the handles queued by done(). Their slots hold Python objects, so this runs with the
// GIL, at the start of every handle-related binding call.
void ReapAbandoned() {
  std::vector<std::shared_ptr<Handle>> dead;
  {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    for (int64_t id : g_reap) {
      auto it = g_handles.find(id);
      if (it == g_handles.end()) continue;
      dead.push_back(std::move(it->second));
      g_handles.erase(it);
    }
    g_reap.clear();
  }
}  // `dead` released here, outside the lock

[[noreturn]] void Raise(const Status& s) {
  const char* cls = s.code() == Status::INVALID_ARGUMENT ? "HorovodInvalidArgumentError"
                    : s.code() == Status::MISMATCH       ? "HorovodMismatchError"
                    : s.code() == Status::SHUT_DOWN      ? "HorovodShutdownError"
                                                         : "HorovodInternalError";
  py::object exc = py::module_::import("horovod.common.exceptions").attr(cls);
  PyErr_SetString(exc.ptr(), s.message().c_str());
  throw py::error_already_set();
}

// The entry's completion: counts the handle down; touches no Python object (background thread).
DoneCallback MakeDone(Handle* hp) {
  return [hp](const Status& s) {  // background thread: no Python objects here
    int64_t reap = 0;
    {
      std::lock_guard<std::mutex> lk(hp->mu);
      if (!s.ok() && hp->status.ok()) hp->status = s;
      if (--hp->pending == 0) {
        if (hp->abandoned)
          reap = hp->id;
        else {
          hp->finished.store(true, std::memory_order_release);
          hp->cv.notify_all();
        }
      }
    }
    // Once queued, hp may be freed at any time: it is not touched past this point.
    if (reap) {
      std::lock_guard<std::mutex> lk(g_handles_mu);
      g_reap.push_back(reap);
    }
  };
}

hvd::OpArgs ReadOpArgs(int op_type, const py::object& names, size_t n, int reduce_op, int root,
                       double prescale, double postscale, const std::vector<int64_t>& splits,
                       const std::string& invalid, const std::string& group) {
  hvd::OpArgs op;
  op.type = static_cast<hvd::OpType>(op_type);  // out of range: Enqueue refuses it
  if (PyUnicode_Check(names.ptr())) {
    op.name = names.cast<std::string>();
    if (!group.empty() && group != op.name)
      throw py::value_error("group '" + group + "' must be the op's name '" + op.name +
                            "' when names is the op's name");
  } else {
    try {
      op.names = names.cast<std::vector<std::string>>();
    } catch (const py::cast_error&) {
      throw py::type_error("names must be the op's name (a str) or a list of one str per input");
    }
    if (op.names.size() != n) throw py::value_error("one name per input is needed");
    op.name = group;
  }
  op.grouped = !group.empty();
  op.reduce_op = static_cast<hvd::ReduceOp>(reduce_op);
  op.root = root;
  op.prescale = prescale;
  op.postscale = postscale;
  op.splits = splits;
  op.invalid = invalid;
  return op;
}

// Registers the handle and queues its entries; returns its id or raises Enqueue's error.
int64_t Submit(const std::shared_ptr<Handle>& h, std::vector<TensorEntry> entries,
               int process_set) {
  ReapAbandoned();
  int64_t id;
  {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    id = h->id = g_next_handle++;
    g_handles[id] = h;  // registered first: done() may run before Enqueue returns
  }
  Status s;
  {
    py::gil_scoped_release nogil;
    s = Enqueue(std::move(entries), process_set);
  }
  if (!s.ok()) {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    g_handles.erase(id);
    Raise(s);
  }
  return id;
}

namespace {

std::shared_ptr<Handle> FindHandle(int64_t h) {
  ReapAbandoned();
  std::lock_guard<std::mutex> lk(g_handles_mu);
  auto it = g_handles.find(h);
  if (it == g_handles.end())
    throw py::value_error("unknown or already synchronized handle " + std::to_string(h));
  return it->second;
}

std::string Describe(const Handle& h) {
  if (h.slots.empty()) return "an empty group";
  return "tensor '" + h.slots[0].name + "'" + (h.slots.size() > 1 ? " and its group" : "");
}

// A finished handle's outputs as Wait returns them, [(output, received_splits)] per tensor;
// engine-allocated outputs are handed over to Python (device memory as DLPack).
py::list Results(Handle& h) {
  py::list results;
  if (h.empty_group) return results;  // its marker's output is nobody's
  for (auto& slot : h.slots) {
    py::object out = slot.output;
    if (slot.owned && slot.device >= 0) {  // device memory: handed over as DLPack
      out = hvd_dlpack::Make(slot.owned, slot.device, slot.engine_dtype, slot.owned_shape);
      slot.owned = nullptr;
    } else if (slot.owned) {
      const hvd::HostBlock b{slot.owned, slot.owned_bytes};
      slot.owned = nullptr;
      out = py::array(slot.dtype, slot.owned_shape, b.data, OwnHostBlock(b));
    }
    py::object splits = py::none();
    if (!slot.received_splits.empty()) splits = py::cast(slot.received_splits);
    results.append(py::make_tuple(out, splits));
  }
  return results;
}

}  // namespace

bool Poll(int64_t id) {
  auto h = FindHandle(id);
  std::lock_guard<std::mutex> lk(h->mu);
  return h->pending == 0;
}

py::list Wait(int64_t id, double timeout_s) {
  auto h = FindHandle(id);
  if (h->waiting)
    throw py::value_error("handle of " + Describe(*h) +
                          " is already being synchronized by another thread");
  struct Waiting {  // cleared however Wait ends, so a timed-out handle can be waited on again
    Handle* h;
    ~Waiting() { h->waiting = false; }
  } waiting{h.get()};
  h->waiting = true;
  if (const int64_t spin_us = hvd::WaitSpinMicros()) {  // a small op's result comes in microseconds
    py::gil_scoped_release nogil;
    const int64_t until = hvd::NowMicros() + spin_us;
    while (!h->finished.load(std::memory_order_acquire) && hvd::NowMicros() < until)
      hvd::CpuRelax();
  }
  auto start = std::chrono::steady_clock::now();
  // Done within the spin (a small op's usual case): no second release of the GIL, no lock.
  // finished is stored after the last done() wrote status, and read here with acquire.
  while (!h->finished.load(std::memory_order_acquire)) {
    bool done;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lk(h->mu);
      done = h->cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return h->pending == 0; });
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s >= 0 && waited > timeout_s) {
      PyErr_SetString(PyExc_TimeoutError,
                      (Describe(*h) + " did not complete within " + std::to_string(timeout_s) +
                       " s: other ranks have not submitted it yet or the op is still running")
                          .c_str());
      throw py::error_already_set();
    }
  }
  {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    g_handles.erase(id);
  }
  if (!h->status.ok()) {
    const bool own = h->status.code() == Status::INVALID_ARGUMENT && !h->refused.empty();
    Raise(own ? Status::InvalidArgument(h->refused) : h->status);
  }
  return Results(*h);
}

void Release(int64_t id) {
  ReapAbandoned();
  std::shared_ptr<Handle> h;
  {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    auto it = g_handles.find(id);
    if (it == g_handles.end()) return;
    h = it->second;
  }
  bool finished;
  {
    std::lock_guard<std::mutex> lk(h->mu);
    finished = h->pending == 0;
    h->abandoned = !finished;
  }
  if (finished) {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    g_handles.erase(id);
  }
}  // `h` released here, with the GIL

}  // namespace hvd_py
