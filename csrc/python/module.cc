// pybind11 bindings: converts NumPy buffers to engine entries, and binds the engine's calls
// (handles and waiting on them: handles.cc; device arrays: device.cc).
// Nothing else lives here; the engine owns all logic. The GIL is released while waiting.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/host_blocks.h"
#include "common/nccl_defects.h"
#include "engine/engine.h"
#include "python/dlpack.h"
#include "python/handles.h"
#include "python/output_blocks.h"

namespace py = pybind11;
using namespace hvd;
using namespace hvd_py;

namespace {

// dtype.isnative without a Python attribute lookup (read once per tensor of a group). NumPy
// writes a native order as '=' ('|' where order does not apply); an explicit native '<' or '>'
// counts too.
bool IsNative(const py::dtype& dt) {
  const char order = dt.byteorder();
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return order == '=' || order == '|' || order == '<';
#else
  return order == '=' || order == '|' || order == '>';
#endif
}

// NumPy has no bfloat16. A frontend whose framework has one (torch) hands its bf16 tensors over
// as uint16 views whose dtype carries metadata {"horovod_dtype": "bfloat16"}
// (horovod/common/engine_types.py, BFLOAT16_BITS): no third-party dtype package needed, and the
// outputs made from the input's dtype carry the tag back. Read only for 2-byte unsigned dtypes.
bool IsTaggedBfloat16(const py::dtype& dt) {
  py::object meta = dt.attr("metadata");  // None, or a read-only mapping (not a dict)
  if (meta.is_none()) return false;
  py::object tag = meta.attr("get")("horovod_dtype");
  return PyUnicode_Check(tag.ptr()) && PyUnicode_CompareWithASCIIString(tag.ptr(), "bfloat16") == 0;
}

// The engine's dtype of a NumPy dtype; false with the reason (not naming the tensor) if none.
bool ToDataType(const py::dtype& dt, const char* what, DataType* out, std::string* why) {
  // The kernels read native values: a byte-swapped array would be reduced as garbage.
  if (!IsNative(dt)) {
    *why = std::string(what) + " dtype " + py::str(dt).cast<std::string>() +
           " is not in this machine's byte order; convert it first, e.g. with "
           "a.astype(a.dtype.newbyteorder('='))";
    return false;
  }
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  bool ok = true;
  if (kind == 'b' && size == 1)
    *out = DataType::BOOL;  // moved, never reduced (the engine refuses that on every rank)
  else if (kind == 'u' && size == 1)
    *out = DataType::UINT8;
  else if (kind == 'i' && size == 1)
    *out = DataType::INT8;
  else if (kind == 'u' && size == 2)
    *out = IsTaggedBfloat16(dt) ? DataType::BFLOAT16 : DataType::UINT16;
  else if (kind == 'i' && size == 2)
    *out = DataType::INT16;
  else if (kind == 'i' && size == 4)
    *out = DataType::INT32;
  else if (kind == 'i' && size == 8)
    *out = DataType::INT64;
  else if (kind == 'f' && size == 2)
    *out = DataType::FLOAT16;
  else if (kind == 'f' && size == 4)
    *out = DataType::FLOAT32;
  else if (kind == 'f' && size == 8)
    *out = DataType::FLOAT64;
  else if (size == 2 && py::str(dt.attr("name")).cast<std::string>() == "bfloat16")
    *out = DataType::BFLOAT16;
  else
    ok = false;
  if (!ok)
    *why = std::string(what) + " dtype " + py::str(dt).cast<std::string>() +
           " is not supported; use " + SupportedDataTypes();
  return ok;
}

DataType DataTypeOf(const py::dtype& dt, const std::string& name, const char* what) {
  DataType t = DataType::UINT8;
  std::string why;
  if (!ToDataType(dt, what, &t, &why)) throw py::value_error("tensor '" + name + "': " + why);
  return t;
}

// One output slot per input, read once (making it per tensor was O(n^2)); empty when the
// engine allocates every output (outputs None, or the empty group's marker).
std::vector<py::object> OutputSlots(const py::object& outputs, size_t n, bool empty_group) {
  std::vector<py::object> outs;
  if (!outputs.is_none() && !empty_group) {
    for (py::handle o : outputs) outs.push_back(py::reinterpret_borrow<py::object>(o));
    if (outs.size() != n) throw py::value_error("one output slot per input is needed");
  }
  return outs;
}

// The inputs as C-contiguous arrays.
std::vector<py::array> ContiguousInputs(const py::list& members, const OpArgs& op) {
  const size_t n = members.size();
  const int count = static_cast<int>(n);
  // Filled in place: a default py::array is a new empty NumPy array, made and freed for
  // nothing (a quarter of a small tensor's cost in the binding, measured with callgrind).
  std::vector<py::array> ins;
  ins.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    py::handle in = members[i];
    // An array that is already C-contiguous is used as it is (ensure() would go through
    // NumPy's conversion machinery).
    if (py::isinstance<py::array>(in) &&
        (py::reinterpret_borrow<py::array>(in).flags() & py::array::c_style)) {
      ins.push_back(py::reinterpret_borrow<py::array>(in));
      continue;
    }
    ins.push_back(py::array::ensure(in, py::array::c_style));
    if (!ins.back())
      throw py::value_error("tensor '" + MemberName(op, static_cast<int>(i), count) +
                            "': input is not array-like");
  }
  return ins;
}

// Same-shape outputs not given (outputs None, or None in a tensor's slot): views of one block
// for the whole call (output_blocks.h). `data` is null when no tensor takes its output here.
struct SharedOutputs {
  std::vector<bool> from_block;  // per tensor
  std::vector<size_t> offset;    // per tensor, into the block
  py::capsule block;
  char* data = nullptr;
};

SharedOutputs TakeSharedOutputs(int op_type, const std::vector<py::array>& ins,
                                const std::vector<py::object>& outs) {
  const bool same_shape = op_type == static_cast<int>(OpType::ALLREDUCE) ||
                          op_type == static_cast<int>(OpType::BROADCAST);
  SharedOutputs shared;
  std::vector<size_t> bytes;  // per tensor; 0 where not from the block
  bool any_from_block = false;
  for (size_t i = 0; i < ins.size(); ++i) {
    const bool from_block = same_shape && (outs.empty() || outs[i].is_none());
    shared.from_block.push_back(from_block);
    bytes.push_back(from_block ? static_cast<size_t>(ins[i].nbytes()) : 0);
    any_from_block = any_from_block || from_block;
  }
  if (any_from_block) {
    size_t total = 0;
    shared.offset = OutputBlockOffsets(bytes, &total);
    void* data = nullptr;
    shared.block = TakeOutputBlock(total, &data);
    shared.data = static_cast<char*>(data);
  }
  return shared;
}

// A given output `out`, checked: a bad one is negotiated like a bad dtype (r->invalid), so that
// the other ranks fail too instead of waiting, and this rank raises its own message.
void CheckOutput(const py::object& out, const py::array& input, Request* r, Handle* h) {
  auto arr = py::isinstance<py::array>(out) ? py::reinterpret_borrow<py::array>(out) : py::array();
  DataType out_dtype = DataType::UINT8;
  std::string why_out;
  if (arr && !ToDataType(arr.dtype(), "out", &out_dtype, &why_out))
    r->invalid = why_out;  // e.g. its byte order
  else if (!arr || !(arr.flags() & py::array::c_style) || !arr.writeable() ||
           arr.nbytes() != input.nbytes() || out_dtype != r->dtype)
    r->invalid = "out must be a writable C-contiguous NumPy array of the input's dtype and size";
  if (!r->invalid.empty() && h->refused.empty())
    h->refused = "tensor '" + r->name + "': " + r->invalid;
}

// The engine writes into the checked output `out`.
void UseOutput(const py::object& out, const Request& r, py::array* input, TensorEntry* e,
               Slot* slot) {
  auto arr = py::reinterpret_borrow<py::array>(out);
  const char* in = static_cast<const char*>(input->data());
  char* o = static_cast<char*>(arr.mutable_data());
  const size_t nb = static_cast<size_t>(input->nbytes());
  // The engine supports only exact aliasing: with a shifted overlap it would read input
  // it has already overwritten. Reduce from a private copy instead.
  if (o != in && o < in + nb && in < o + nb)
    *input = py::array(input->dtype(), r.shape, in);  // copies: no base object given
  e->output = o;
  slot->output = arr;
}

// Outputs sized by the engine (allgather, alltoall, reducescatter) go into a kept host block.
hvd::OutputAllocator HostOutputAllocator(Slot* sp, size_t itemsize) {
  return [sp, itemsize](const std::vector<int64_t>& shape, void** data) {
    size_t bytes = static_cast<size_t>(NumElements(shape)) * itemsize;
    const hvd::HostBlock b = hvd::TakeHostBlock(bytes);
    sp->owned = b.data;
    sp->owned_bytes = b.bytes;
    if (!sp->owned)
      return Status::Internal("out of memory allocating " + std::to_string(bytes) + " bytes");
    sp->owned_shape = shape;
    *data = sp->owned;
    return Status();
  };
}

// Tensor i of the call: its request, its input and output, and its slot in the handle.
void FillEntry(const OpArgs& op, size_t i, py::array input, const py::object& out,
               const SharedOutputs& shared, int device, Handle* h, TensorEntry* e) {
  const int count = static_cast<int>(h->slots.size());
  Slot& slot = h->slots[i];
  // A byte-swapped input means a caller skipped the frontend's conversion: raised here.
  const py::dtype dtype = input.dtype();
  if (!IsNative(dtype)) DataTypeOf(dtype, MemberName(op, static_cast<int>(i), count), "input");
  DataType engine_dtype = DataType::UINT8;
  std::string why;
  // A dtype the engine lacks (complex, object, ...) is not raised here: raised on this rank
  // only, it would leave the other ranks waiting for the op. It is negotiated as invalid
  // (dtype not sent: UINT8 stands in), so every rank fails; this rank with its own message
  // (Handle::refused).
  const bool usable = ToDataType(dtype, "input", &engine_dtype, &why);
  e->request = MakeRequest(op, static_cast<int>(i), count, usable ? engine_dtype : DataType::UINT8,
                           std::vector<int64_t>(input.shape(), input.shape() + input.ndim()));
  Request& r = e->request;
  if (h->empty_group) r.group_size = 0;  // the marker (engine.h, EmptyGroupMarker)
  if (!usable) {
    r.invalid = why;  // an unusable dtype is named first
    if (h->refused.empty()) h->refused = "tensor '" + r.name + "': " + why;
  }
  if (device >= 0) e->device = device;
  if (!out.is_none() && r.invalid.empty()) CheckOutput(out, input, &r, h);
  if (!out.is_none() && r.invalid.empty()) UseOutput(out, r, &input, e, &slot);
  if (shared.data && shared.from_block[i]) {
    e->output = shared.data + shared.offset[i];
    slot.output =
        py::array(dtype, std::vector<py::ssize_t>(input.shape(), input.shape() + input.ndim()),
                  e->output, shared.block);
  }
  e->input = input.data();
  slot.input = input;
  slot.dtype = dtype;
  slot.name = r.name;
  e->allocate_output = HostOutputAllocator(&slot, static_cast<size_t>(input.itemsize()));
  e->received_splits = &slot.received_splits;
  e->done = MakeDone(h);
}

// Queues one op per input[, output] atomically and returns one handle for all of them.
// names: the op's name, or one name per input (ReadOpArgs, handles.h). outputs: None (the
// engine allocates) or a list with an array or None per input. invalid: why the frontend found
// the arguments unusable; the ops are still negotiated, and fail on every rank with it
// (engine.h, Enqueue). group: non-empty for a grouped op, whose ranks must agree on its size
// (members are "<group>.<index>").
int64_t EnqueueGroup(int op_type, const py::object& names, const py::list& inputs,
                     const py::object& outputs, int reduce_op, int root, double prescale,
                     double postscale, const std::vector<int64_t>& splits, int device,
                     const std::string& invalid, const std::string& group, int process_set) {
  auto h = std::make_shared<Handle>();
  // A group of no tensors is negotiated too, as one empty uint8 marker of group size 0 (the
  // engine's EmptyGroupMarker): ranks that all pass none get [], and a rank whose group is
  // empty while the others' is not fails every rank's group, named, instead of returning at
  // once and leaving the others waiting.
  h->empty_group = !group.empty() && inputs.empty() && PyUnicode_Check(names.ptr());
  py::list marker;
  if (h->empty_group) marker.append(py::array_t<uint8_t>(0));
  const py::list& members = h->empty_group ? marker : inputs;
  const size_t n = members.size();
  OpArgs op =
      ReadOpArgs(op_type, names, n, reduce_op, root, prescale, postscale, splits, invalid, group);
  // device >= 0 claims the buffers are on that GPU: only the engine's refusal paths can be
  // reached from NumPy (a GPU build checks the claim with CUDA and refuses host memory).
  op.gpu = device >= 0;
  const std::vector<py::object> outs = OutputSlots(outputs, n, h->empty_group);
  std::vector<py::array> ins = ContiguousInputs(members, op);
  const SharedOutputs shared = TakeSharedOutputs(op_type, ins, outs);
  h->slots.resize(n);
  std::vector<TensorEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    const py::object out = outs.empty() ? py::object(py::none()) : outs[i];
    FillEntry(op, i, std::move(ins[i]), out, shared, device, h.get(), &entries[i]);
  }
  h->pending = n;
  return Submit(h, std::move(entries), process_set);
}

py::dict BuildInfo() {
  py::dict d;
  d["mpi_built"] = true;
  const LinkedLibraries info = GetLinkedLibraries();  // linked library versions; needs no GPU
  d["mpi_library"] = info.mpi_library;
  d["nccl_built"] = info.nccl_version;
  d["gloo_built"] = true;  // Gloo's role: the TCP transport (horovodrun --gloo, torchrun)
  d["cuda_built"] = info.cuda_runtime_version != 0;
  d["cuda_runtime_version"] = info.cuda_runtime_version;
  d["nccl_defects"] = NcclDefectNotes(info.nccl_version);  // known defects of the loaded NCCL
  d["gpu_operations"] = info.nccl_version ? "NCCL" : "";
  d["cpu_operations"] = GetConfig().cpu_operations;
  return d;
}

// The bindings by subject; PYBIND11_MODULE below calls each once.

// Start and end, and what this process is: init, shutdown, the topology, the build.
void BindLifecycle(py::module_& m) {
  m.def(
      "init",
      [](uintptr_t comm, const std::string& initial_sets) {
        Status s;
        {
          py::gil_scoped_release nogil;
          s = Init(comm, initial_sets);
        }
        ReapAbandoned();  // a re-init over TCP shut the failed world down: its ops ended
        if (!s.ok()) Raise(s);
      },
      py::arg("comm") = 0, py::arg("initial_sets") = "");
  m.def("worlds_formed", &WorldsFormed);
  m.def("engine_alive", [] { return IsInitialized() && !PeerLossEnded(); });
  m.def("shutdown", [] {
    {
      py::gil_scoped_release nogil;
      Shutdown();
    }
    ReapAbandoned();  // Shutdown failed every pending op: abandoned ones can go now
  });
  m.def("is_initialized", &IsInitialized);
  m.def("transport_choice", &TransportChoice);
  m.def("topology", [] {
    Topology t = GetTopology();
    py::dict d;
    d["rank"] = t.rank;
    d["size"] = t.size;
    d["local_rank"] = t.local_rank;
    d["local_size"] = t.local_size;
    d["cross_rank"] = t.cross_rank;
    d["cross_size"] = t.cross_size;
    d["mpi_threads_multiple"] = t.mpi_threads_multiple;
    d["homogeneous"] = t.homogeneous;
    d["transport"] = t.transport;
    return d;
  });
  m.def("build_info", &BuildInfo);
  m.def("gpu_device_count", [] {  // raises "no GPU visible ..." (or "no GPU support") if none
    int n = 0;
    Status s = GpuDeviceCount(&n);
    if (!s.ok()) Raise(s);
    return n;
  });
}

// The TCP transport's rendezvous server, run by rank 0 or by a driver (engine.h,
// StartRendezvousServer).
void BindRendezvous(py::module_& m) {
  m.def(
      "start_rendezvous",
      [](const std::string& addr, int port, int size, const std::string& secret, double timeout_s) {
        int64_t handle = 0;
        int bound = 0;
        Status s;
        {
          py::gil_scoped_release nogil;
          s = StartRendezvousServer(addr, port, size, secret, timeout_s, &handle, &bound);
        }
        if (!s.ok()) Raise(s);
        return py::make_tuple(handle, bound);
      },
      py::arg("addr"), py::arg("port"), py::arg("size"), py::arg("secret"), py::arg("timeout_s"));
  m.def(
      "stop_rendezvous",
      [](int64_t handle) {
        py::gil_scoped_release nogil;
        StopRendezvousServer(handle);
      },
      py::arg("handle"));
}

// The timeline file, started and stopped at run time.
void BindTimeline(py::module_& m) {
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        Status s;
        {
          py::gil_scoped_release nogil;
          s = StartTimeline(path, mark_cycles);
        }
        if (!s.ok()) Raise(s);
      },
      py::arg("file_path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", [] {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = StopTimeline();
    }
    if (!s.ok()) Raise(s);
  });
}

// The engine's names for op types, reduce ops, dtypes and tensors.
void BindTypeTables(py::module_& m) {
  // The engine's type tables (common.h), so that Python declares none: op types and reduce
  // ops by name, dtypes in value order as (name, value, reducible).
  m.def("op_types", [] {
    py::dict d;
    for (int i = 0; i < kNumOpTypes; ++i) {
      std::string name = OpTypeName(static_cast<OpType>(i));
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      d[py::str(name)] = i;
    }
    return d;
  });
  m.def("reduce_ops", [] {
    py::dict d;
    for (int i = 0; i < kNumReduceOps; ++i) d[ReduceOpName(static_cast<ReduceOp>(i))] = i;
    return d;
  });
  m.def("data_types", [] {
    py::list l;
    for (int i = 0; i < kNumDataTypes; ++i) {
      OpSpec sum;  // a plain host allreduce (Sum, no scaling) of the dtype: refused for bool only
      sum.dtype = static_cast<DataType>(i);
      l.append(py::make_tuple(DataTypeName(sum.dtype), i, UnsupportedReduction(sum).empty()));
    }
    return l;
  });
  // The name of tensor `index` of a call of `count` (engine.h, MemberName): as the engine names
  // an op given by its name, for the frontends' own messages.
  m.def(
      "member_name",
      [](const std::string& name, int index, int count, bool grouped) {
        return MemberName(name, index, count, grouped);
      },
      py::arg("name"), py::arg("index"), py::arg("count"), py::arg("grouped"));
  // "uint8, int8, ... or float64 (or bool, for allgather, broadcast and alltoall)": the dtypes
  // a frontend's "dtype ... is not supported; use ..." message lists.
  m.def("supported_data_types", &SupportedDataTypes);
}

// The configuration knobs (HOROVOD_*): their table, one value checked, the parsed values.
void BindKnobs(py::module_& m) {
  m.def("config_knobs", [] {
    py::list out;
    for (const auto& k : Config::Describe()) {
      const bool numeric = k.type == "int" || k.type == "float";
      auto bound = [&](double v) -> py::object {
        if (!numeric) return py::none();
        return k.type == "int" ? py::object(py::int_(static_cast<int64_t>(v))) : py::float_(v);
      };
      out.append(py::make_tuple(k.env, k.default_value, k.doc, k.type, bound(k.min), bound(k.max),
                                k.choices, k.agree));
    }
    return out;
  });
  // One knob's value checked as init() parses it: "" or init()'s error (for launchers).
  m.def("check_knob", &Config::Check, py::arg("env"), py::arg("value"));
  m.def("config_values", [] {
    // The parsed knobs: after init() those the engine runs with; before, the environment parsed
    // as init() would parse it (a bad value raises init()'s ValueError).
    Config c = GetConfig();
    if (!IsInitialized()) {
      std::string error;
      c = Config::FromEnvironment(&error);
      if (!error.empty()) throw py::value_error(error);
    }
    py::dict d;
#define HVD_VALUE(field, env, type, def, lo, hi, scope, doc) d[env] = c.field;
    HVD_CONFIG_KNOBS(HVD_VALUE)
#undef HVD_VALUE
    return d;
  });
}

// Submitting ops and synchronizing their handles; the bare ring of the benchmark.
void BindSubmission(py::module_& m) {
  m.def("enqueue", &EnqueueGroup, py::arg("op_type"), py::arg("names"), py::arg("inputs"),
        py::arg("outputs"), py::arg("reduce_op"), py::arg("root"), py::arg("prescale"),
        py::arg("postscale"), py::arg("splits"), py::arg("device") = -1, py::arg("invalid") = "",
        py::arg("group") = "", py::arg("process_set") = 0);
  m.def("enqueue_device", &EnqueueDevice, py::arg("op_type"), py::arg("names"), py::arg("inputs"),
        py::arg("outputs"), py::arg("reduce_op"), py::arg("root"), py::arg("prescale"),
        py::arg("postscale"), py::arg("splits"), py::arg("invalid") = "", py::arg("group") = "",
        py::arg("process_set") = 0);
  m.def("dlpack_describe", &hvd_dlpack::Describe);  // a producer's capsule, read, not consumed
  m.def("poll", &Poll);
  m.def("release", &Release);
  m.def("wait", &Wait, py::arg("handle"), py::arg("timeout_s") = -1.0);
  // enqueue, then wait without a limit: a blocking call's one crossing into the binding (the
  // frontend's allreduce of a plain array; no handle object, no second call).
  m.def("enqueue_wait", [](int op_type, const py::object& names, const py::list& inputs,
                           const py::object& outputs, int reduce_op, int root, double prescale,
                           double postscale, const std::vector<int64_t>& splits, int device,
                           const std::string& invalid, const std::string& group, int process_set) {
    return Wait(EnqueueGroup(op_type, names, inputs, outputs, reduce_op, root, prescale, postscale,
                             splits, device, invalid, group, process_set),
                -1.0);
  });
  m.def("live_handles", [] {  // for tests: handles neither synchronized nor freed yet
    ReapAbandoned();
    std::lock_guard<std::mutex> lk(g_handles_mu);
    return g_handles.size();
  });
  m.def("kept_host_bytes", &hvd::KeptHostBytes);  // for tests: blocks kept for a later output
  m.def("ring_allreduce_raw", [](py::array buf) {
    // The bare ring on a separate communicator, bypassing queue and negotiation: the benchmark's
    // "ring alone" line. float32 sum, in place.
    if (!(buf.flags() & py::array::c_style) || buf.dtype().kind() != 'f' || buf.itemsize() != 4)
      throw py::value_error("ring_allreduce_raw takes a C-contiguous float32 array");
    float* data = static_cast<float*>(buf.mutable_data());
    size_t n = static_cast<size_t>(buf.size());
    Status s;
    {
      py::gil_scoped_release nogil;
      s = RingAllreduceRaw(data, n);
    }
    if (!s.ok()) Raise(s);
  });
}

// Process sets: collective calls, made by every rank in the same order (engine.h).
void BindProcessSets(py::module_& m) {
  m.def(
      "add_process_set",
      [](std::vector<int64_t> ranks, std::string invalid) {
        int32_t id = -1;
        Status s;
        {
          py::gil_scoped_release nogil;
          s = AddProcessSet(std::move(ranks), std::move(invalid), &id);
        }
        if (!s.ok()) Raise(s);
        return id;
      },
      py::arg("ranks"), py::arg("invalid") = "");
  m.def("remove_process_set", [](int32_t id) {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = RemoveProcessSet(id);
    }
    if (!s.ok()) Raise(s);
  });
  m.def("process_sets", [] {  // {id: (ranks, rank in the set or -1)}
    py::dict d;
    for (const auto& ps : ProcessSets()) d[py::int_(ps.id)] = py::make_tuple(ps.ranks, ps.rank);
    return d;
  });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Horovod engine bindings (internal; use horovod.numpy or horovod.tensorflow)";
  BindLifecycle(m);
  BindRendezvous(m);
  BindTimeline(m);
  BindTypeTables(m);
  BindKnobs(m);
  BindSubmission(m);
  BindProcessSets(m);
}
