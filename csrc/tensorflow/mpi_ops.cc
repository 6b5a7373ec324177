// TensorFlow kernels: thin adapters from TF tensors to engine entries. Every op is an
// AsyncOpKernel that enqueues into the process's one engine (libhorovod_core.so, shared with the
// NumPy frontend) and completes from the engine's callback on its background thread.
//  - Negotiation key: the `tensor_name` input if non-empty (eager ops named by Python), else the
//    node name, which is stable across the steps of a tf.function (so the cached fast path
//    applies from the second step on). A string input rather than an attr: eager kernels are
//    cached per attr value, so per-call names as attrs would grow that cache without bound.
//  - Same-shape ops (allreduce, broadcast) write into an output allocated up front, forwarded
//    from the input when TF allows it: no copy beyond the collective itself; a CPU allreduce
//    of several tensors of one dtype takes its outputs as slices of one block (GroupOp). Other
//    ops allocate their output from the background thread once negotiation fixed its shape.
//    Host outputs the kernels allocate come from kept host blocks (output_block.h): mapped
//    already from the last step, and huge pages, which Open MPI's shared memory moves faster.
//  - Engine statuses become TF's own error types: a disagreement between ranks is
//    FailedPrecondition, bad arguments InvalidArgument, a rank that left Aborted.
//  - GPU builds (HOROVOD_GPU_NCCL) also register every op for GPU tensors: the entry carries
//    the device and TF's compute stream, which the engine orders its NCCL work after. Names and
//    alltoall's splits stay in host memory.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/engine.h"
#include "tensorflow/core/framework/control_flow.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/output_block.h"
#if HOROVOD_GPU_NCCL
#include "xla/stream_executor/stream.h"
#endif

namespace tf = tensorflow;

namespace hvd {
namespace {

using tf::shape_inference::InferenceContext;

// bool is a dtype of its own for the engine: a bool tensor and a uint8 tensor under one name
// are a mismatch, and bool is only moved (the engine refuses to reduce it, on every rank).
bool ToEngineType(tf::DataType t, DataType* out) {
  switch (t) {
    case tf::DT_BOOL: *out = DataType::BOOL; return true;
    case tf::DT_UINT8: *out = DataType::UINT8; return true;
    case tf::DT_INT8: *out = DataType::INT8; return true;
    case tf::DT_UINT16: *out = DataType::UINT16; return true;
    case tf::DT_INT16: *out = DataType::INT16; return true;
    case tf::DT_INT32: *out = DataType::INT32; return true;
    case tf::DT_INT64: *out = DataType::INT64; return true;
    case tf::DT_HALF: *out = DataType::FLOAT16; return true;
    case tf::DT_BFLOAT16: *out = DataType::BFLOAT16; return true;
    case tf::DT_FLOAT: *out = DataType::FLOAT32; return true;
    case tf::DT_DOUBLE: *out = DataType::FLOAT64; return true;
    default: return false;
  }
}

tf::Status ToTF(const Status& s) {
  switch (s.code()) {
    case Status::OK: return tf::Status();
    case Status::INVALID_ARGUMENT: return tf::errors::InvalidArgument(s.message());
    case Status::MISMATCH: return tf::errors::FailedPrecondition(s.message());
    case Status::SHUT_DOWN: return tf::errors::Aborted(s.message());
    default: return tf::errors::Internal(s.message());
  }
}

std::vector<int64_t> Dims(const tf::TensorShape& shape) {
  std::vector<int64_t> d;
  for (int i = 0; i < shape.dims(); ++i) d.push_back(shape.dim_size(i));
  return d;
}

// Completes an op of one or more entries once every entry is done: TF's done() runs once.
struct Completion {
  Completion(tf::OpKernelContext* c, tf::AsyncOpKernel::DoneCallback d, int n)
      : context(c), done(std::move(d)), pending(n) {}
  void Finish(const Status& s) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!s.ok() && first_error.ok()) first_error = s;
      if (--pending > 0) return;
    }
    if (!first_error.ok()) context->SetStatus(ToTF(first_error));
    done();
  }
  tf::OpKernelContext* context;
  tf::AsyncOpKernel::DoneCallback done;
  std::mutex mu;
  int pending;
  Status first_error;
};

// The common part of every kernel: the negotiation name and the engine request.
class HorovodKernel : public tf::AsyncOpKernel {
 public:
  explicit HorovodKernel(tf::OpKernelConstruction* c, OpType type) : AsyncOpKernel(c) {
    op_.type = type;
    int reduce_op = 0, root = 0;
    float prescale = 1.0f, postscale = 1.0f;
    if (c->HasAttr("reduce_op")) OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduce_op));
    if (c->HasAttr("prescale_factor")) OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale));
    if (c->HasAttr("postscale_factor"))
      OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale));
    if (c->HasAttr("root_rank")) OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
    if (c->HasAttr("grouped")) OP_REQUIRES_OK(c, c->GetAttr("grouped", &op_.grouped));
    if (c->HasAttr("process_set_id"))
      OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
    op_.reduce_op = static_cast<ReduceOp>(reduce_op);  // out of range: Enqueue refuses it
    op_.root = root;
    op_.prescale = prescale;
    op_.postscale = postscale;
    gpu_ = c->device_type() == tf::DeviceType(tf::DEVICE_GPU);
    op_.gpu = gpu_;
  }

 protected:
  // This call's arguments: the kernel's attrs under this call's name (TensorName).
  OpArgs Args(tf::OpKernelContext* c) const {
    OpArgs op = op_;
    op.name = TensorName(c);
    return op;
  }

  // The name input is the last one. Inside a while loop, iterations of one node can run at
  // once (parallel_iterations): the loop frame and iteration keep their names apart. Frame ids
  // are hashes of the frame names and the parent iterations (root frame: 0), so every rank
  // derives the same name.
  std::string TensorName(tf::OpKernelContext* c) const {
    const tf::Tensor& t = c->input(c->num_inputs() - 1);
    std::string given = t.NumElements() == 1 ? std::string(t.scalar<tf::tstring>()()) : "";
    std::string n = given.empty() ? name() : given;
    const tf::FrameAndIter fi = c->frame_iter();
    if (fi.frame_id != 0 && fi.frame_id != tf::kIllegalFrameId) {
      char suffix[64];
      std::snprintf(suffix, sizeof(suffix), "@frame%016llx.%lld",
                    static_cast<unsigned long long>(fi.frame_id),
                    static_cast<long long>(fi.iter_id));
      n += suffix;
    }
    return n;
  }

  // Validates the dtype and fills the entry of tensor i of the call's n (MakeRequest, engine.h);
  // false sets the op's error.
  bool MakeEntry(tf::OpKernelContext* c, const OpArgs& op, int i, int n, const tf::Tensor& input,
                 TensorEntry* e) const {
    DataType dtype = DataType::UINT8;
    if (!ToEngineType(input.dtype(), &dtype)) {
      c->CtxFailure(tf::errors::InvalidArgument("tensor '", MemberName(op, i, n), "': dtype ",
                                                tf::DataTypeString(input.dtype()),
                                                " is not supported; use ", SupportedDataTypes()));
      return false;
    }
    e->request = MakeRequest(op, i, n, dtype, Dims(input.shape()));
    e->input = input.tensor_data().data();
#if HOROVOD_GPU_NCCL
    if (gpu_) {
      const auto* info = c->device()->tensorflow_accelerator_device_info();
      auto* stream = c->op_device_context() ? c->op_device_context()->stream() : nullptr;
      if (!info || !stream) {
        c->CtxFailure(tf::errors::Internal("tensor '", e->request.name,
                                           "': GPU kernel without a GPU device or stream"));
        return false;
      }
      e->device = info->gpu_id;
      e->stream = stream->platform_specific_handle().stream;
    }
#endif
    return true;
  }

  // Output `index`, allocated on the background thread once negotiation fixed its shape: in
  // host memory a kept host block (output_block.h), as the grouped allreduce's outputs are.
  OutputAllocator AllocateOutput(tf::OpKernelContext* c, int index) const {
    return [c, index, gpu = gpu_](const std::vector<int64_t>& shape, void** data) {
      tf::TensorShape ts;
      for (auto d : shape) ts.AddDim(d);
      if (!gpu) {
        tf::Status s = OutputInHostBlock(c, index, ts, data);
        return s.ok() ? Status() : Status::Internal(std::string(s.message()));
      }
      tf::Tensor* out = nullptr;
      tf::Status s = c->allocate_output(index, ts, &out);
      if (!s.ok()) return Status::Internal(std::string(s.message()));
      *data = const_cast<char*>(out->tensor_data().data());
      return Status();
    };
  }

  void Submit(tf::OpKernelContext* c, std::vector<TensorEntry> entries, DoneCallback done,
              std::function<void(const Status&)> before_done = nullptr) {
    auto completion =
        std::make_shared<Completion>(c, std::move(done), static_cast<int>(entries.size()));
    for (auto& e : entries)
      e.done = [completion, before_done](const Status& s) {
        if (before_done) before_done(s);
        completion->Finish(s);
      };
    Status s = Enqueue(std::move(entries), process_set_id_);
    // Not queued: no done() will run, so complete here (every entry counts once).
    if (!s.ok()) {
      c->SetStatus(ToTF(s));
      completion->done();
    }
  }

  // The number of ranks in this op's process set (a set removed meanwhile: the engine refuses
  // the op, naming it; 1 keeps the even split defined until then).
  int SetSize() const {
    for (const auto& ps : ProcessSets())
      if (ps.id == process_set_id_) return std::max<int>(1, static_cast<int>(ps.ranks.size()));
    return 1;
  }

  // The attrs: type, reduce op, root, factors, grouped (hvd.grouped_*, gradients,
  // broadcast_variables), gpu; a call adds its name (Args).
  OpArgs op_;
  int process_set_id_ = 0;  // hvd.ProcessSet's id: 0, every rank
  bool gpu_ = false;        // registered for DEVICE_GPU: tensors in device memory
};

// The ops over N tensors of one dtype, one engine entry each, negotiated together. Allreduce
// and broadcast keep the input's shape: their output is taken up front (the input's own buffer
// when nothing else needs it, so the ring runs in place). Allgather and reducescatter learn
// their output's shape from negotiation: it is allocated then, on the background thread.
// A CPU allreduce of several tensors (a step's gradients) takes its outputs as slices of one
// block instead, laid out for the fused ring (OutputBlockOffsets, engine.h): the ring then reads
// each input once and gathers straight into the outputs. In place, the gradients are scattered
// pieces, and each ring chunk spanning them is copied to be sent and again when gathered: about
// 1 B more copies per step at 2 ranks (docs/benchmarks.md).
template <OpType kType>
class GroupOp : public HorovodKernel {
 public:
  explicit GroupOp(tf::OpKernelConstruction* c) : HorovodKernel(c, kType) {}

  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    constexpr bool kSameShape = kType == OpType::ALLREDUCE || kType == OpType::BROADCAST;
    const int n = c->num_inputs() - 1;
    const OpArgs op = Args(c);
    std::vector<TensorEntry> entries(n);
    bool block = false;
    if constexpr (kType == OpType::ALLREDUCE) {
      // A group may mix dtypes (its members are negotiated and fused by dtype): one block per
      // call holds one dtype.
      const tf::DataType dtype = c->input(0).dtype();
      const size_t esize = tf::DataTypeSize(dtype);
      block = !gpu_ && n > 1 && SetSize() > 1 && esize > 0 && 64 % esize == 0;
      for (int i = 1; i < n && block; ++i) block = c->input(i).dtype() == dtype;
      if (block) OP_REQUIRES_OK_ASYNC(c, OutputsInOneBlock(c, n), done);
    }
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& input = c->input(i);
      if (!MakeEntry(c, op, i, n, input, &entries[i])) return done();
      if (block) {
        entries[i].output = const_cast<char*>(c->mutable_output(i)->tensor_data().data());
      } else if constexpr (kSameShape) {
        tf::Tensor* out = nullptr;
        OP_REQUIRES_OK_ASYNC(c, c->forward_input_or_allocate_output({i}, i, input.shape(), &out),
                             done);
        entries[i].output = const_cast<char*>(out->tensor_data().data());
      } else {
        entries[i].allocate_output = AllocateOutput(c, i);
      }
    }
    Submit(c, std::move(entries), std::move(done));
  }
};

// Alltoall's splits as the caller gave them (any integer dtype, read without a cast) into
// `out`; returns why they cannot be used, or "". The received splits are int32 (upstream's op),
// and every value another rank sends here is one of its splits: so each split must fit in
// int32. Count, sign and sum are the engine's checks (engine.cc, Validate).
template <typename T>
bool ReadIntSplits(const tf::Tensor& splits, std::vector<int64_t>* out, std::string* given) {
  bool fits = true;
  auto flat = splits.flat<T>();
  for (int64_t i = 0; i < flat.size(); ++i) {
    const T v = flat(i);
    if constexpr (sizeof(T) > sizeof(int32_t) || std::is_same_v<T, uint32_t>)
      fits = fits && v <= static_cast<T>(INT32_MAX);
    out->push_back(static_cast<int64_t>(v));  // only used if every value fits
    *given += (i ? ", " : "") + std::to_string(v);
  }
  *given = "[" + *given + "]";
  return fits;
}

std::string ReadSplits(const tf::Tensor& splits, std::vector<int64_t>* out) {
  const int64_t n = splits.NumElements();
  auto summary = [&] { return splits.SummarizeValue(std::min<int64_t>(n, 4096), true); };
  if (!tf::DataTypeIsInteger(splits.dtype()))
    return "alltoall splits must be integers, got " + tf::DataTypeString(splits.dtype()) +
           " splits " + summary();
  if (splits.dims() != 1)
    return "alltoall splits must be a 1-D tensor (one split per rank), got shape " +
           splits.shape().DebugString() + ": " + summary();
  std::string given;
  bool fits = true;
  switch (splits.dtype()) {
    case tf::DT_INT8: fits = ReadIntSplits<int8_t>(splits, out, &given); break;
    case tf::DT_UINT8: fits = ReadIntSplits<uint8_t>(splits, out, &given); break;
    case tf::DT_INT16: fits = ReadIntSplits<int16_t>(splits, out, &given); break;
    case tf::DT_UINT16: fits = ReadIntSplits<uint16_t>(splits, out, &given); break;
    case tf::DT_INT32: fits = ReadIntSplits<int32_t>(splits, out, &given); break;
    case tf::DT_UINT32: fits = ReadIntSplits<uint32_t>(splits, out, &given); break;
    case tf::DT_INT64: fits = ReadIntSplits<int64_t>(splits, out, &given); break;
    case tf::DT_UINT64: fits = ReadIntSplits<uint64_t>(splits, out, &given); break;
    default:  // an integer type the op's Tsplits does not list
      return "alltoall splits of dtype " + tf::DataTypeString(splits.dtype()) +
             " are not supported";
  }
  if (!fits)
    return "alltoall splits must fit in int32 (TensorFlow's received splits are int32), got " +
           given;
  return "";
}

// Upstream's default splits: `rows` divided evenly by `n` ranks. Rows that do not divide are
// refused as upstream refuses them, rather than split unevenly: the reason is negotiated, so
// every rank fails with it. The NumPy frontend says the same (horovod/numpy/__init__.py).
std::string EvenSplits(int64_t rows, int n, std::vector<int64_t>* out) {
  if (rows % n != 0)
    return "alltoall without splits needs a first dimension divisible by the number of ranks (" +
           std::to_string(n) + "), got " + std::to_string(rows) +
           " rows; pass splits to send uneven rows";
  out->assign(n, rows / n);
  return "";
}

// Alltoall: inputs (tensor, splits, name); outputs (rows received, rows from each rank).
// Bad splits, and a reason the Python side found (`splits_error`: splits that are not even a
// tensor), do not fail the op here: they go to the engine as the request's `invalid` reason,
// which is negotiated, so that every rank fails with it instead of waiting for this one.
class AlltoallOp : public HorovodKernel {
 public:
  explicit AlltoallOp(tf::OpKernelConstruction* c) : HorovodKernel(c, OpType::ALLTOALL) {
    OP_REQUIRES_OK(c, c->GetAttr("splits_error", &splits_error_));
  }
  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    OpArgs op = Args(c);
    const tf::Tensor& input = c->input(0);
    op.invalid = splits_error_;
    if (op.invalid.empty()) op.invalid = ReadSplits(c->input(1), &op.splits);
    // No splits (empty, upstream's convention for splits=None): the rows divided evenly.
    if (op.invalid.empty() && op.splits.empty() && input.dims() > 0)
      op.invalid = EvenSplits(input.dim_size(0), SetSize(), &op.splits);
    if (!op.invalid.empty()) op.splits.clear();
    std::vector<TensorEntry> entries(1);
    TensorEntry& e = entries[0];
    if (!MakeEntry(c, op, 0, 1, input, &e)) return done();
    e.allocate_output = AllocateOutput(c, 0);
    auto received = std::make_shared<std::vector<int64_t>>();
    e.received_splits = received.get();
    Submit(c, std::move(entries), std::move(done), [c, received](const Status& s) {
      if (!s.ok()) return;
      tf::Tensor* out = nullptr;
      tf::Status st =
          c->allocate_output(1, tf::TensorShape({static_cast<int64_t>(received->size())}), &out);
      if (!st.ok()) return c->SetStatus(st);
      auto v = out->flat<int32_t>();
      for (size_t i = 0; i < received->size(); ++i) v(i) = static_cast<int32_t>((*received)[i]);
    });
  }

 private:
  std::string splits_error_;
};

// An op whose tensors Horovod cannot take (a dtype outside the op's list, found by the Python
// check in horovod/tensorflow/mpi_ops.py): its entries carry that reason as the engine's
// invalid marker instead of data, named as the op's own would be, so the op fails on every rank
// with the reason, named by rank, instead of the other ranks waiting for this one. It has no
// data to move: outputs are the inputs, never produced since the op always fails.
class InvalidOp : public HorovodKernel {
 public:
  explicit InvalidOp(tf::OpKernelConstruction* c) : HorovodKernel(c, OpType::ALLREDUCE) {
    int op_type = 0;
    OP_REQUIRES_OK(c, c->GetAttr("op_type", &op_type));
    OP_REQUIRES(c, op_type >= 0 && op_type < kNumOpTypes,
                tf::errors::InvalidArgument("HorovodInvalid: unknown op_type ", op_type));
    op_.type = static_cast<OpType>(op_type);
    op_.gpu = false;  // it reads no data: every tensor stays in host memory
    OP_REQUIRES_OK(c, c->GetAttr("reason", &op_.invalid));
    if (op_.invalid.empty()) op_.invalid = "the input cannot be handed to Horovod";
  }
  void ComputeAsync(tf::OpKernelContext* c, DoneCallback done) override {
    const int n = c->num_inputs() - 1;
    const OpArgs op = Args(c);
    std::vector<TensorEntry> entries(n);
    for (int i = 0; i < n; ++i) {
      // UINT8: a valid placeholder, as an invalid request's dtype and shape are not read.
      entries[i].request = MakeRequest(op, i, n, DataType::UINT8, {});
      c->set_output(i, c->input(i));
    }
    Submit(c, std::move(entries), std::move(done));
  }
};

// Shapes: same-shape ops keep their input's; the others know all but the first dimension.
tf::Status SameShapes(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return tf::Status();
}
tf::Status UnknownFirstDim(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) {
    tf::shape_inference::ShapeHandle in = c->input(i), out;
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(in, 1, &in));
    TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
    c->set_output(i, out);
  }
  return tf::Status();
}

// Every op is stateful: it communicates. Otherwise Grappler folds an op whose inputs are
// constants at graph-optimization time (a collective run outside the step, and run again at
// step time if folding failed on some rank only: the ranks then disagree on how often it ran),
// and merges ops with equal inputs (common subexpression elimination).
// Upstream's lists plus bfloat16, and the 16-bit integers for the reductions too (the engine
// reduces them on the CPU; a GPU reduction of them is refused on every rank at negotiation).
#define HVD_REDUCE_TYPES "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double}"
#define HVD_REDUCE_LIST "list(" HVD_REDUCE_TYPES ") >= 1"
#define HVD_MOVE_TYPES \
  "{bool, uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double}"
#define HVD_MOVE_LIST "list(" HVD_MOVE_TYPES ") >= 1"

REGISTER_OP("HorovodAllreduce")
    .Attr("T: " HVD_REDUCE_LIST)
    .Attr("grouped: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("reduced: T")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Allreduces a list of tensors across ranks in one negotiation (fused by dtype).");

REGISTER_OP("HorovodBroadcast")
    .Attr("T: " HVD_MOVE_LIST)
    .Attr("grouped: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("root_rank: int")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("broadcast: T")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Returns root_rank's tensors on every rank.");

REGISTER_OP("HorovodAllgather")
    .Attr("T: " HVD_MOVE_LIST)
    .Attr("grouped: bool = false")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("gathered: T")
    .SetIsStateful()
    .SetShapeFn(UnknownFirstDim)
    .Doc("Concatenates every rank's tensors along the first dimension, which may differ.");

REGISTER_OP("HorovodReducescatter")
    .Attr("T: " HVD_REDUCE_LIST)
    .Attr("grouped: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("scattered: T")
    .SetIsStateful()
    .SetShapeFn(UnknownFirstDim)
    .Doc("Reduces across ranks; each rank keeps its block of rows.");

// Splits of any real dtype reach the kernel, which checks them before any conversion (a cast
// to int32 in Python wrapped int64 values and truncated floats). Empty splits: even ones. A scalar
// tensor is not refused by the shape function either: the engine names it on every rank at run
// time.
REGISTER_OP("HorovodAlltoall")
    .Attr("T: " HVD_MOVE_TYPES)
    .Attr(
        "Tsplits: {int8, uint8, int16, uint16, int32, uint32, int64, uint64, half, bfloat16, "
        "float, double, bool} = DT_INT32")
    .Attr("splits_error: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: Tsplits")
    .Input("tensor_name: string")
    .Output("received: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      tf::shape_inference::ShapeHandle in = c->input(0), out;
      if (!c->RankKnown(in) || c->Rank(in) == 0) {
        c->set_output(0, c->UnknownShape());
        c->set_output(1, c->Vector(c->UnknownDim()));
        return tf::Status();
      }
      TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
      c->set_output(0, out);
      c->set_output(1, c->Vector(c->UnknownDim()));
      return tf::Status();
    })
    .Doc(
        "Sends splits[r] rows to rank r; returns the rows received and how many came from each "
        "rank.");

// Any dtype: see InvalidOp. Stateful, so that it is neither folded nor pruned in a graph.
REGISTER_OP("HorovodInvalid")
    .Attr("T: list(type) >= 1")
    .Attr("grouped: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("op_type: int")
    .Attr("reason: string")
    .Input("tensors: T")
    .Input("tensor_name: string")
    .Output("outputs: T")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Fails on every rank with `reason`: an op whose tensors Horovod cannot take.");

REGISTER_KERNEL_BUILDER(Name("HorovodInvalid").Device(tf::DEVICE_CPU), InvalidOp);
REGISTER_KERNEL_BUILDER(Name("HorovodAllreduce").Device(tf::DEVICE_CPU),
                        GroupOp<OpType::ALLREDUCE>);
REGISTER_KERNEL_BUILDER(Name("HorovodBroadcast").Device(tf::DEVICE_CPU),
                        GroupOp<OpType::BROADCAST>);
REGISTER_KERNEL_BUILDER(Name("HorovodAllgather").Device(tf::DEVICE_CPU),
                        GroupOp<OpType::ALLGATHER>);
REGISTER_KERNEL_BUILDER(Name("HorovodReducescatter").Device(tf::DEVICE_CPU),
                        GroupOp<OpType::REDUCESCATTER>);
REGISTER_KERNEL_BUILDER(Name("HorovodAlltoall").Device(tf::DEVICE_CPU), AlltoallOp);
#if HOROVOD_GPU_NCCL
// Under tf.device("/GPU:0") without soft placement the op must still be placeable: it reads no
// data, so everything stays in host memory.
REGISTER_KERNEL_BUILDER(Name("HorovodInvalid")
                            .Device(tf::DEVICE_GPU)
                            .HostMemory("tensors")
                            .HostMemory("tensor_name")
                            .HostMemory("outputs"),
                        InvalidOp);
REGISTER_KERNEL_BUILDER(Name("HorovodAllreduce").Device(tf::DEVICE_GPU).HostMemory("tensor_name"),
                        GroupOp<OpType::ALLREDUCE>);
REGISTER_KERNEL_BUILDER(Name("HorovodBroadcast").Device(tf::DEVICE_GPU).HostMemory("tensor_name"),
                        GroupOp<OpType::BROADCAST>);
REGISTER_KERNEL_BUILDER(Name("HorovodAllgather").Device(tf::DEVICE_GPU).HostMemory("tensor_name"),
                        GroupOp<OpType::ALLGATHER>);
REGISTER_KERNEL_BUILDER(
    Name("HorovodReducescatter").Device(tf::DEVICE_GPU).HostMemory("tensor_name"),
    GroupOp<OpType::REDUCESCATTER>);
REGISTER_KERNEL_BUILDER(Name("HorovodAlltoall")
                            .Device(tf::DEVICE_GPU)
                            .HostMemory("splits")
                            .HostMemory("tensor_name")
                            .HostMemory("received_splits"),
                        AlltoallOp);
#endif

}  // namespace
}  // namespace hvd
