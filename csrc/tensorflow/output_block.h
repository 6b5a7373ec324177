// A CPU grouped allreduce's outputs as slices of one block (GroupOp, mpi_ops.cc).
#pragma once

#include "tensorflow/core/framework/op_kernel.h"

namespace hvd {

// Sets outputs 0..n-1 of `c` (inputs 0..n-1 give their shapes; one dtype whose size divides 64)
// to 64-byte aligned slices of one block, laid out for the fused ring (OutputBlockOffsets,
// engine.h). The block is a kept host block (common/host_blocks.h): huge pages from 4 MiB on,
// given back for the next step's call when TensorFlow drops the last slice.
tensorflow::Status OutputsInOneBlock(tensorflow::OpKernelContext* c, int n);

}  // namespace hvd
