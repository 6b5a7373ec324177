// Host memory for outputs the bindings allocate: one block per call for the outputs of a
// same-shape op (allreduce, broadcast) called without `out`, and single buffers for the engine's
// variable-size outputs (allgather, alltoall, reducescatter).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace hvd_py {

namespace py = pybind11;

// std::free-able memory of `bytes`, 64-byte aligned; large ones 2 MiB aligned and advised to use
// huge pages.
void* AllocateOutput(size_t bytes);

// A block of at least `bytes` in *data, and the capsule that owns it: NumPy views of the block
// take the capsule as their base, and when the last one dies the block is kept for a later call
// (the newest 128 blocks, up to 256 MiB; a larger block is freed) instead of freed. Throws
// std::bad_alloc when memory is exhausted (MemoryError on this rank, as NumPy's own allocation
// raised it before).
py::capsule TakeOutputBlock(size_t bytes, void** data);

}  // namespace hvd_py
