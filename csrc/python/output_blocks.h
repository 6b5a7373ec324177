// Host blocks (common/host_blocks.h) handed to NumPy: one block per call for the outputs of a
// same-shape op (allreduce, broadcast) called without `out`, and a block of its own for each
// variable-size output (allgather, alltoall, reducescatter).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

#include "common/host_blocks.h"

namespace hvd_py {

namespace py = pybind11;

// A block of at least `bytes` in *data, and the capsule that owns it: NumPy views of the block
// take the capsule as their base, and when the last one dies the block goes back to the kept
// ones (hvd::KeepHostBlock). Throws std::bad_alloc when memory is exhausted (MemoryError on this
// rank, as NumPy's own allocation raised it before).
py::capsule TakeOutputBlock(size_t bytes, void** data);

// The capsule that owns block `b` (taken with hvd::TakeHostBlock) for a NumPy array over it, and
// gives it back when the array dies.
py::capsule OwnHostBlock(hvd::HostBlock b);

}  // namespace hvd_py
