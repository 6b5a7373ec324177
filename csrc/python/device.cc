// The ops on device arrays (CuPy, torch CUDA tensors): horovod/common/device.py reads the
// pointer, shape, dtype, device and stream; this queues them as the TF kernels queue theirs.
#include <pybind11/stl.h>

#include "python/handles.h"

namespace hvd_py {

using namespace hvd;

// Device arrays (horovod/common/device.py reads __cuda_array_interface__ / __dlpack__): the same
// ops on device pointers, as the TF kernels hand them over. inputs[i]: (owner, pointer, shape,
// engine dtype, device or -1 (the pointer's), the producer's stream as an int). outputs[i]:
// None (allocated by the engine in device memory, returned as a DLPack capsule) or (owner,
// pointer) of a contiguous output of the input's size from the input's own library.
int64_t EnqueueDevice(int op_type, const py::object& names, const py::list& inputs,
                      const py::list& outputs, int reduce_op, int root, double prescale,
                      double postscale, const std::vector<int64_t>& splits,
                      const std::string& invalid, const std::string& group, int process_set) {
  auto h = std::make_shared<Handle>();
  const size_t n = inputs.size();
  OpArgs op =
      ReadOpArgs(op_type, names, n, reduce_op, root, prescale, postscale, splits, invalid, group);
  op.gpu = true;
  if (outputs.size() != n)
    throw py::value_error("one name and one output slot per input are needed");
  h->slots.resize(n);
  std::vector<TensorEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    auto d = inputs[i].cast<py::tuple>();
    Slot& slot = h->slots[i];
    TensorEntry& e = entries[i];
    e.request =
        MakeRequest(op, static_cast<int>(i), static_cast<int>(n),
                    static_cast<DataType>(d[3].cast<int>()), d[2].cast<std::vector<int64_t>>());
    Request& r = e.request;
    e.input = reinterpret_cast<const void*>(d[1].cast<uintptr_t>());
    e.device = d[4].cast<int>();
    e.stream = reinterpret_cast<void*>(d[5].cast<uintptr_t>());
    slot.input = d[0];
    slot.name = r.name;
    slot.device = e.device < 0 ? 0 : e.device;
    slot.engine_dtype = r.dtype;
    const size_t itemsize = DataTypeSize(r.dtype);
    const size_t bytes = static_cast<size_t>(NumElements(r.shape)) * itemsize;
    py::object out = outputs[i];
    const bool same_shape = r.type == OpType::ALLREDUCE || r.type == OpType::BROADCAST;
    if (!out.is_none()) {
      auto o = out.cast<py::tuple>();
      slot.output = o[0];
      e.output = reinterpret_cast<void*>(o[1].cast<uintptr_t>());
    } else if (same_shape) {
      // No library to allocate with: device memory now, returned like an allgather's output.
      // A failure (no GPU, out of memory) is negotiated, so every rank fails with it.
      Status s = GpuAllocate(slot.device, bytes, &slot.owned);
      if (!s.ok()) {
        if (r.invalid.empty()) r.invalid = s.message();
      } else {
        slot.owned_shape = r.shape;
        e.output = slot.owned;
      }
    }
    Slot* sp = &slot;
    e.allocate_output = [sp, itemsize](const std::vector<int64_t>& shape, void** data) {
      const size_t nbytes = static_cast<size_t>(NumElements(shape)) * itemsize;
      Status s = GpuAllocate(sp->device, nbytes, &sp->owned);
      if (!s.ok()) return s;
      sp->owned_shape = shape;
      *data = sp->owned;
      return Status();
    };
    e.received_splits = &slot.received_splits;
    e.done = MakeDone(h.get());
  }
  h->pending = n;
  return Submit(h, std::move(entries), process_set);
}

}  // namespace hvd_py
