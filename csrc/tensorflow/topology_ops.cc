// Topology as TF ops (upstream's rank_op, size_op, ...): the value is read when the graph runs,
// not when it is built, so a graph built before hvd.init() (or saved and run in another job)
// still gets this process's values. Synchronous and cheap: they read the engine's topology.
#include "engine/engine.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf = tensorflow;

namespace hvd {
namespace {

enum class Field { RANK, SIZE, LOCAL_RANK, LOCAL_SIZE, PROCESS_SET_INCLUDED };

template <Field kField>
class TopologyOp : public tf::OpKernel {
 public:
  explicit TopologyOp(tf::OpKernelConstruction* c) : OpKernel(c) {
    if (c->HasAttr("process_set_id")) OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set_id_));
  }
  void Compute(tf::OpKernelContext* c) override {
    OP_REQUIRES(
        c, IsInitialized(),
        tf::errors::FailedPrecondition("Horovod has not been initialized; use hvd.init()."));
    const Topology t = GetTopology();
    int32_t v = 0;
    switch (kField) {
      case Field::RANK: v = t.rank; break;
      case Field::SIZE: v = t.size; break;
      case Field::LOCAL_RANK: v = t.local_rank; break;
      case Field::LOCAL_SIZE: v = t.local_size; break;
      case Field::PROCESS_SET_INCLUDED: v = 1; break;  // every rank is in the global set
    }
    if (set_id_ != 0 && (kField == Field::SIZE || kField == Field::PROCESS_SET_INCLUDED)) {
      bool found = false;
      for (const auto& ps : ProcessSets())
        if (ps.id == set_id_) {
          found = true;
          v = kField == Field::SIZE ? static_cast<int32_t>(ps.ranks.size()) : ps.rank >= 0;
        }
      OP_REQUIRES(c, found,
                  tf::errors::InvalidArgument("there is no process set with id ", set_id_,
                                              " (never added, or removed)"));
    }
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, tf::TensorShape({}), &out));
    out->scalar<int32_t>()() = v;
  }

 private:
  int set_id_ = 0;
};

// Stateful: the value depends on the process, so it must be neither folded into a constant at
// graph-optimization time nor merged across graphs.
REGISTER_OP("HorovodRank")
    .Output("rank: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_OP("HorovodLocalRank")
    .Output("local_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_OP("HorovodLocalSize")
    .Output("local_size: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_OP("HorovodSize")
    .Attr("process_set_id: int = 0")
    .Output("size: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_OP("HorovodProcessSetIncluded")
    .Attr("process_set_id: int = 0")
    .Output("included: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);

REGISTER_KERNEL_BUILDER(Name("HorovodRank").Device(tf::DEVICE_CPU), TopologyOp<Field::RANK>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalRank").Device(tf::DEVICE_CPU),
                        TopologyOp<Field::LOCAL_RANK>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalSize").Device(tf::DEVICE_CPU),
                        TopologyOp<Field::LOCAL_SIZE>);
REGISTER_KERNEL_BUILDER(Name("HorovodSize").Device(tf::DEVICE_CPU), TopologyOp<Field::SIZE>);
REGISTER_KERNEL_BUILDER(Name("HorovodProcessSetIncluded").Device(tf::DEVICE_CPU),
                        TopologyOp<Field::PROCESS_SET_INCLUDED>);
#if HOROVOD_GPU_NCCL
// Placeable under tf.device("/GPU:0"): the scalar stays in host memory.
REGISTER_KERNEL_BUILDER(Name("HorovodRank").Device(tf::DEVICE_GPU).HostMemory("rank"),
                        TopologyOp<Field::RANK>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalRank").Device(tf::DEVICE_GPU).HostMemory("local_rank"),
                        TopologyOp<Field::LOCAL_RANK>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalSize").Device(tf::DEVICE_GPU).HostMemory("local_size"),
                        TopologyOp<Field::LOCAL_SIZE>);
REGISTER_KERNEL_BUILDER(Name("HorovodSize").Device(tf::DEVICE_GPU).HostMemory("size"),
                        TopologyOp<Field::SIZE>);
REGISTER_KERNEL_BUILDER(
    Name("HorovodProcessSetIncluded").Device(tf::DEVICE_GPU).HostMemory("included"),
    TopologyOp<Field::PROCESS_SET_INCLUDED>);
#endif

}  // namespace
}  // namespace hvd
