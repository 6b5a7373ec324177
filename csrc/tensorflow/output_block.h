// Host outputs of the TensorFlow kernels (mpi_ops.cc) in kept host blocks (common/host_blocks.h):
// a CPU grouped allreduce's outputs as slices of one block, a variable-size output in a block.
#pragma once

#include "tensorflow/core/framework/op_kernel.h"

namespace hvd {

// Sets outputs 0..n-1 of `c` (inputs 0..n-1 give their shapes; one dtype whose size divides 64)
// to 64-byte aligned slices of one block, laid out for the fused ring (OutputBlockOffsets,
// engine.h). The block is a kept host block (common/host_blocks.h): huge pages from 4 MiB on,
// given back for the next step's call when TensorFlow drops the last slice.
tensorflow::Status OutputsInOneBlock(tensorflow::OpKernelContext* c, int n);

// Sets output `index` of `c` to a tensor of `shape` (the output's dtype) over a kept host block
// of its own, and its data pointer in *data: the engine's variable-size outputs (allgather,
// alltoall, reducescatter), allocated once negotiation fixed their shape.
tensorflow::Status OutputInHostBlock(tensorflow::OpKernelContext* c, int index,
                                     const tensorflow::TensorShape& shape, void** data);

}  // namespace hvd
