// Host blocks (common/host_blocks.h) handed to NumPy: one block per call for the outputs of a
// same-shape op (allreduce, broadcast) called without `out`.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace hvd_py {

namespace py = pybind11;

// A block of at least `bytes` in *data, and the capsule that owns it: NumPy views of the block
// take the capsule as their base, and when the last one dies the block goes back to the kept
// ones (hvd::KeepHostBlock). Throws std::bad_alloc when memory is exhausted (MemoryError on this
// rank, as NumPy's own allocation raised it before).
py::capsule TakeOutputBlock(size_t bytes, void** data);

}  // namespace hvd_py
