// The frontend's handle table and completion (handles.h).
#include "python/handles.h"

#include <pybind11/stl.h>

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

}  // namespace hvd_py
