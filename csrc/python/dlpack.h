// DLPack (https://dmlc.github.io/dlpack) for the device-array frontend: reading a producer's
// capsule (torch.Tensor.__dlpack__) and exporting an engine-allocated device output as one, so
// that the input's own library (torch.from_dlpack, cupy.from_dlpack) takes it over. The structs
// are DLPack's stable C ABI (v0.x, the unversioned "dltensor" capsule), declared here because
// the frontends' build has no DLPack header.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace hvd_dlpack {

namespace py = pybind11;

constexpr int32_t kDLCUDA = 2;

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: C-contiguous
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// The fields of a producer's capsule, as a tuple Python reads (horovod/common/device.py):
// (data pointer incl. byte_offset, shape, strides or None, (code, bits, lanes),
//  (device_type, device_id)). The capsule is not consumed: the producer keeps the memory.
inline py::tuple Describe(const py::capsule& cap) {
  if (std::string(cap.name() ? cap.name() : "") != "dltensor")
    throw py::value_error("not an unconsumed DLPack capsule (name 'dltensor')");
  auto* m = static_cast<DLManagedTensor*>(cap.get_pointer());
  const DLTensor& t = m->dl_tensor;
  py::list shape, strides;
  for (int i = 0; i < t.ndim; ++i) {
    shape.append(t.shape[i]);
    if (t.strides) strides.append(t.strides[i]);
  }
  const auto data = reinterpret_cast<uintptr_t>(t.data) + static_cast<uintptr_t>(t.byte_offset);
  return py::make_tuple(data, py::tuple(shape),
                        t.strides ? py::object(py::tuple(strides)) : py::object(py::none()),
                        py::make_tuple(t.dtype.code, t.dtype.bits, t.dtype.lanes),
                        py::make_tuple(t.device.device_type, t.device.device_id));
}

// What an exported output owns: the device memory (freed with hvd::GpuFree) and the shape.
struct Export {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  int device = 0;
};

inline DLDataType ToDL(hvd::DataType t) {
  using hvd::DataType;
  switch (t) {
    case DataType::UINT8: return {1, 8, 1};
    case DataType::INT8: return {0, 8, 1};
    case DataType::UINT16: return {1, 16, 1};
    case DataType::INT16: return {0, 16, 1};
    case DataType::INT32: return {0, 32, 1};
    case DataType::INT64: return {0, 64, 1};
    case DataType::FLOAT16: return {2, 16, 1};
    case DataType::BFLOAT16: return {4, 16, 1};
    case DataType::FLOAT32: return {2, 32, 1};
    case DataType::FLOAT64: return {2, 64, 1};
    case DataType::BOOL: return {6, 8, 1};
  }
  return {1, 8, 1};
}

// A "dltensor" capsule owning `data` (device memory from hvd::GpuAllocate). Its deleter, called
// by the consumer once it drops the tensor or by the capsule if never consumed, touches no
// Python object, so any thread may run it.
inline py::capsule Make(void* data, int device, hvd::DataType dtype,
                        const std::vector<int64_t>& shape) {
  auto* ex = new Export;
  ex->shape = shape;
  ex->device = device;
  DLTensor& t = ex->managed.dl_tensor;
  t.data = data;
  t.device = {kDLCUDA, device};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = ToDL(dtype);
  t.shape = ex->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  ex->managed.manager_ctx = ex;
  ex->managed.deleter = [](DLManagedTensor* self) {
    auto* e = static_cast<Export*>(self->manager_ctx);
    hvd::GpuFree(e->device, e->managed.dl_tensor.data);
    delete e;
  };
  return py::capsule(&ex->managed, "dltensor", [](PyObject* o) {
    // Consumers rename a capsule they took ("used_dltensor") and call the deleter themselves.
    if (!PyCapsule_IsValid(o, "dltensor")) return;
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(o, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  });
}

}  // namespace hvd_dlpack
