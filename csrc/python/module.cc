// pybind11 bindings: converts NumPy buffers to engine entries and completion to handles.
// Nothing else lives here; the engine owns all logic. The GIL is released while waiting.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/engine.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace py = pybind11;
using namespace hvd;

namespace {

struct Handle {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::string name;
  py::object keep_input, output;  // touched only with the GIL held
  py::dtype dtype;
  void* owned = nullptr;  // engine-allocated output (allgather, alltoall, reducescatter)
  std::vector<int64_t> owned_shape;
  std::vector<int64_t> received_splits;
  ~Handle() { std::free(owned); }
};

std::mutex g_handles_mu;
std::unordered_map<int64_t, std::shared_ptr<Handle>> g_handles;
int64_t g_next_handle = 1;

[[noreturn]] void Raise(const Status& s) {
  if (s.code() == Status::INVALID_ARGUMENT) throw py::value_error(s.message());
  const char* cls = s.code() == Status::MISMATCH   ? "HorovodMismatchError"
                    : s.code() == Status::SHUT_DOWN ? "HorovodShutdownError"
                                                    : "HorovodInternalError";
  py::object exc = py::module_::import("horovod.common.exceptions").attr(cls);
  PyErr_SetString(exc.ptr(), s.message().c_str());
  throw py::error_already_set();
}

MPI_Comm CommFromHandle(uintptr_t h) {
  if (h == 0) return MPI_COMM_NULL;
  // mpi4py's MPI._handleof(): a pointer in Open MPI, an int in MPICH; a C cast fits both.
  return (MPI_Comm)h;
}

std::shared_ptr<Handle> FindHandle(int64_t h) {
  std::lock_guard<std::mutex> lk(g_handles_mu);
  auto it = g_handles.find(h);
  if (it == g_handles.end()) throw py::value_error("unknown or already synchronized handle " + std::to_string(h));
  return it->second;
}

// One tuple per tensor: (op_type, name, input, output_or_None, dtype, reduce_op, root,
// prescale, postscale, splits). All are queued atomically; returns their handles.
std::vector<int64_t> EnqueueMany(const py::list& specs) {
  std::vector<TensorEntry> entries;
  std::vector<std::shared_ptr<Handle>> handles;
  for (const auto& item : specs) {
    auto t = item.cast<py::tuple>();
    auto input = t[2].cast<py::array>();
    if (!(input.flags() & py::array::c_style)) throw py::value_error("input must be C-contiguous");
    auto h = std::make_shared<Handle>();
    TensorEntry e;
    Request& r = e.request;
    r.type = static_cast<OpType>(t[0].cast<int>());
    r.name = t[1].cast<std::string>();
    r.dtype = static_cast<DataType>(t[4].cast<int>());
    r.reduce_op = static_cast<ReduceOp>(t[5].cast<int>());
    r.root = t[6].cast<int>();
    r.prescale = t[7].cast<double>();
    r.postscale = t[8].cast<double>();
    r.splits = t[9].cast<std::vector<int64_t>>();
    r.rank = GetTopology().rank;
    for (py::ssize_t i = 0; i < input.ndim(); ++i) r.shape.push_back(input.shape(i));
    e.input = input.data();
    if (!t[3].is_none()) {
      auto out = t[3].cast<py::array>();
      if (!(out.flags() & py::array::c_style) || !out.writeable() || out.nbytes() != input.nbytes())
        throw py::value_error("output must be a writable C-contiguous array of the input's size");
      e.output = out.mutable_data();
      h->output = out;
    }
    h->keep_input = input;
    h->dtype = input.dtype();
    h->name = r.name;
    Handle* raw = h.get();
    e.allocate_output = [raw](const std::vector<int64_t>& shape, void** data) {
      size_t bytes = static_cast<size_t>(NumElements(shape)) * static_cast<size_t>(raw->dtype.itemsize());
      raw->owned = std::malloc(bytes ? bytes : 1);
      if (!raw->owned) return Status::Internal("out of memory allocating " + std::to_string(bytes) + " bytes");
      raw->owned_shape = shape;
      *data = raw->owned;
      return Status();
    };
    e.received_splits = &h->received_splits;
    e.done = [h](const Status& s) {  // background thread: no Python objects here
      {
        std::lock_guard<std::mutex> lk(h->mu);
        h->status = s;
        h->done = true;
      }
      h->cv.notify_all();
    };
    entries.push_back(std::move(e));
    handles.push_back(std::move(h));
  }
  Status s;
  {
    py::gil_scoped_release nogil;
    s = Enqueue(std::move(entries));
  }
  if (!s.ok()) Raise(s);
  std::vector<int64_t> ids;
  std::lock_guard<std::mutex> lk(g_handles_mu);
  for (auto& h : handles) {
    ids.push_back(g_next_handle);
    g_handles[g_next_handle++] = std::move(h);
  }
  return ids;
}

bool Poll(int64_t id) {
  auto h = FindHandle(id);
  std::lock_guard<std::mutex> lk(h->mu);
  return h->done;
}

// Waits for completion (timeout_s < 0: no limit), checking for Ctrl-C every 100 ms. Returns
// (output, received_splits); raises the op's error. The handle is released either way.
py::tuple Wait(int64_t id, double timeout_s) {
  auto h = FindHandle(id);
  auto start = std::chrono::steady_clock::now();
  while (true) {
    bool done;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lk(h->mu);
      done = h->cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return h->done; });
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s >= 0 && waited > timeout_s) {
      PyErr_SetString(PyExc_TimeoutError,
                      ("tensor '" + h->name + "' did not complete within " + std::to_string(timeout_s) +
                       " s: other ranks have not submitted it yet or the op is still running")
                          .c_str());
      throw py::error_already_set();
    }
  }
  {
    std::lock_guard<std::mutex> lk(g_handles_mu);
    g_handles.erase(id);
  }
  if (!h->status.ok()) Raise(h->status);
  py::object out = h->output;
  if (h->owned) {
    void* data = h->owned;
    h->owned = nullptr;
    py::capsule free_when_done(data, [](void* p) { std::free(p); });
    out = py::array(h->dtype, h->owned_shape, data, free_when_done);
  }
  py::object splits = py::none();
  if (!h->received_splits.empty()) splits = py::cast(h->received_splits);
  return py::make_tuple(out, splits);
}

py::dict BuildInfo() {
  py::dict d;
  d["mpi_built"] = true;
  d["mpi_library"] = MpiLibraryVersion();
  d["nccl_built"] = 0;
  d["gloo_built"] = false;
  d["cuda_built"] = false;
  d["cpu_operations"] = GetConfig().cpu_operations;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Horovod engine bindings (internal; use horovod.numpy or horovod.tensorflow)";
  m.def("init", [](uintptr_t comm) {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = Init(CommFromHandle(comm));
    }
    if (!s.ok()) Raise(s);
  }, py::arg("comm") = 0);
  m.def("shutdown", [] {
    py::gil_scoped_release nogil;
    Shutdown();
  });
  m.def("is_initialized", &IsInitialized);
  m.def("topology", [] {
    Topology t = GetTopology();
    py::dict d;
    d["rank"] = t.rank; d["size"] = t.size; d["local_rank"] = t.local_rank;
    d["local_size"] = t.local_size; d["cross_rank"] = t.cross_rank; d["cross_size"] = t.cross_size;
    d["mpi_threads_multiple"] = t.mpi_threads_multiple; d["homogeneous"] = t.homogeneous;
    return d;
  });
  m.def("build_info", &BuildInfo);
  m.def("config_knobs", [] {
    py::list out;
    for (const auto& k : Config::Describe()) out.append(py::make_tuple(k.env, k.default_value, k.doc));
    return out;
  });
  m.def("enqueue", &EnqueueMany);
  m.def("poll", &Poll);
  m.def("wait", &Wait, py::arg("handle"), py::arg("timeout_s") = -1.0);
  m.def("ring_allreduce_raw", [](py::array buf) {
    // The bare ring on a separate communicator, bypassing queue and negotiation: the benchmark's
    // "ring alone" line. float32 sum, in place.
    if (!(buf.flags() & py::array::c_style) || buf.dtype().kind() != 'f' || buf.itemsize() != 4)
      throw py::value_error("ring_allreduce_raw takes a C-contiguous float32 array");
    MPI_Comm comm = RawComm();
    if (comm == MPI_COMM_NULL) Raise(Status::InvalidArgument("Horovod has not been initialized; use hvd.init()."));
    static RingScratch scratch;
    void* data = buf.mutable_data();
    size_t n = static_cast<size_t>(buf.size());
    py::gil_scoped_release nogil;
    RingAllreduce(data, n, DataType::FLOAT32, ReduceOp::SUM, GetConfig().ring_chunk_bytes, &scratch, comm);
  });
}
