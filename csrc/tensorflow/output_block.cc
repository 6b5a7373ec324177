// Output blocks for TensorFlow (output_block.h). Why not TensorFlow's allocator: TensorFlow's CPU
// allocator gives a step's 13.4 MiB of gradient outputs (MobileNetV2) 4 KiB pages, which Open
// MPI's shared-memory transport pins and copies one by one; a kept block on 2 MiB pages is
// mapped already and moves faster (common/host_blocks.cc, docs/benchmarks.md).
#include "tensorflow/output_block.h"

#include <vector>

#include "common/host_blocks.h"
#include "engine/engine.h"
#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf = tensorflow;

namespace hvd {
namespace {

// Owns a host block while any tensor refers to it (slices hold the root buffer); the last
// reference gives it back.
class HostBlockBuffer : public tf::TensorBuffer {
 public:
  explicit HostBlockBuffer(HostBlock b) : tf::TensorBuffer(b.data), block_(b) {}
  ~HostBlockBuffer() override { KeepHostBlock(block_); }
  size_t size() const override { return block_.bytes; }
  tf::TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tf::AllocationDescription* proto) const override {
    proto->set_requested_bytes(static_cast<int64_t>(block_.bytes));
    proto->set_allocated_bytes(static_cast<int64_t>(block_.bytes));
  }

 private:
  HostBlock block_;
};

}  // namespace

tf::Status OutputsInOneBlock(tf::OpKernelContext* c, int n) {
  const tf::DataType dtype = c->input(0).dtype();
  const size_t esize = tf::DataTypeSize(dtype);  // divides 64: offsets are whole elements
  std::vector<size_t> bytes(n);
  for (int i = 0; i < n; ++i) bytes[i] = c->input(i).TotalBytes();
  size_t total = 0;
  const std::vector<size_t> at = OutputBlockOffsets(bytes, &total);
  HostBlock b = TakeHostBlock(total);
  if (!b.data)
    return tf::errors::ResourceExhausted("out of memory allocating ", total,
                                         " bytes for a grouped allreduce's outputs");
  auto* buffer = new HostBlockBuffer(b);
  tf::Tensor block(dtype, tf::TensorShape({static_cast<int64_t>(total / esize)}), buffer);
  buffer->Unref();  // the tensor holds its own reference
  for (int i = 0; i < n; ++i) {
    const tf::Tensor& input = c->input(i);
    const int64_t first = static_cast<int64_t>(at[i] / esize);
    tf::Tensor out;
    if (!out.CopyFrom(block.Slice(first, first + input.NumElements()), input.shape()))
      return tf::errors::Internal("output block slice of ", input.NumElements(),
                                  " elements does not take shape ", input.shape().DebugString());
    c->set_output(i, out);
  }
  return tf::OkStatus();
}

tf::Status OutputInHostBlock(tf::OpKernelContext* c, int index, const tf::TensorShape& shape,
                             void** data) {
  const tf::DataType dtype = c->expected_output_dtype(index);
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * tf::DataTypeSize(dtype);
  HostBlock b = TakeHostBlock(bytes);
  if (!b.data)
    return tf::errors::ResourceExhausted("out of memory allocating ", bytes, " bytes for output ",
                                         index);
  auto* buffer = new HostBlockBuffer(b);
  tf::Tensor out(dtype, shape, buffer);
  buffer->Unref();  // the tensor holds its own reference
  *data = b.data;
  c->set_output(index, out);
  return tf::OkStatus();
}

}  // namespace hvd
