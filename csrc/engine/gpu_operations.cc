// Runs negotiated GPU responses (GPU builds only). Per device: an engine-owned stream, a fusion
// buffer in device memory and an NCCL communicator, all made on the first op that needs them.
// Order of work on the engine's stream: wait for each input's ready event (recorded on the
// framework's stream at Enqueue), pack, run the NCCL collective, unpack, record `done`. The
// background thread then polls `done` together with ncclCommGetAsyncError, inside a watched
// section, so a peer that never joins is reported (and, with a shutdown time, ends the job) by
// the watchdog like a blocked MPI collective, and an NCCL failure becomes a named error.
// Completion is synchronous per response: done() callbacks fire only once results are in memory.
// Reductions follow a ReducePlan (common/nccl_defects.h): a communicator of one rank never calls
// NCCL's reductions (nor any NCCL collective: a copy, or nothing in place, and our own scaling
// kernel, ops/nccl_scale.cc), and ncclAvg or a pre-multiplied sum is used only where no known
// defect of the loaded NCCL touches it; otherwise a sum and our own scaling on the device.
#include <cuda_runtime_api.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/message.h"
#include "common/nccl_defects.h"
#include "common/reduce_kernels.h"
#include "engine/gpu_context.h"
#include "engine/timeline.h"
#include "engine/watchdog.h"
#include "ops/nccl_collectives.h"
#include "transport/transport.h"

namespace hvd {
namespace {

const char* Activity(OpType t) {
  switch (t) {
    case OpType::ALLREDUCE: return "NCCL_ALLREDUCE";
    case OpType::ALLGATHER: return "NCCL_ALLGATHER";
    case OpType::BROADCAST: return "NCCL_BROADCAST";
    case OpType::ALLTOALL: return "NCCL_ALLTOALL";
    case OpType::REDUCESCATTER: return "NCCL_REDUCESCATTER";
    case OpType::JOIN:
    case OpType::ADD_PROCESS_SET:
    case OpType::REMOVE_PROCESS_SET: break;  // never GPU ops: host requests of the engine
  }
  return "NCCL";
}

struct Device {
  int id = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  NcclComm nccl;
  void* fusion = nullptr;
  size_t fusion_size = 0;
  void* staged = nullptr;  // a reducescatter's scaled input (the fusion buffer may be its output)
  size_t staged_size = 0;
};

class NcclOperations : public GpuOperations {
 public:
  NcclOperations(Transport* net, Timeline* timeline) : net_(net), timeline_(timeline) {}
  ~NcclOperations() override {
    // The CUDA context may already be torn down at process exit: only free what is safe.
    for (auto& kv : devices_) {
      Device& d = kv.second;
      if (d.nccl.comm) ncclCommDestroy(d.nccl.comm);
      if (d.fusion) cudaFree(d.fusion);
      if (d.staged) cudaFree(d.staged);
      if (d.done) cudaEventDestroy(d.done);
      if (d.stream) cudaStreamDestroy(d.stream);
    }
  }

  Status Execute(const Response& r, std::vector<TensorEntry>& es) override {
    const std::string& tensor = r.names[0];
    const int id = es[0].device;
    for (const auto& e : es)
      if (e.device != id)  // a fused group spans one rank's devices only if it uses several
        return Status::InvalidArgument("tensors '" + tensor + "' and '" + e.request.name +
                                       "' are on different GPUs of one rank; use one GPU per rank "
                                       "(pin it with local_rank)");
    // The controller refused these for every rank already; the same shared check here keeps
    // the GPU path's rules the CPU path's (no bool reductions, no 16-bit integer ones).
    const std::string unsupported = UnsupportedReduction(r.spec());
    if (!unsupported.empty())
      return Status::InvalidArgument("tensor '" + tensor + "': " + unsupported);
    Device* d = nullptr;
    Status s = Get(id, tensor, &d);
    if (!s.ok()) return s;
    if (!d->nccl.aborted.empty())
      return Status::ShutDown("tensor '" + tensor +
                              "': the NCCL communicator was aborted earlier (" + d->nccl.aborted +
                              "); GPU collectives cannot continue");
    WatchSection w;
    w.what = Activity(r.type);
    w.tensor = &tensor;
    w.more_tensors = static_cast<int>(es.size()) - 1;
    WatchScope watch(w);
    for (const auto& e : es)
      if (e.ready)
        HVD_CUDA_CHECK(cudaStreamWaitEvent(d->stream, static_cast<cudaEvent_t>(e.ready.get()), 0),
                       tensor);
    if (timeline_->enabled())
      for (const auto& e : es) timeline_->ActivityStart(e.request.name, Activity(r.type));
    Status op;
    switch (r.type) {
      case OpType::ALLREDUCE: op = Allreduce(r, es, d); break;
      case OpType::ALLGATHER: op = Allgather(r, es[0], d); break;
      case OpType::BROADCAST: op = Broadcast(r, es[0], d); break;
      case OpType::ALLTOALL: op = Alltoall(r, es[0], d); break;
      case OpType::REDUCESCATTER: op = Reducescatter(r, es[0], d); break;
      case OpType::JOIN:
      case OpType::ADD_PROCESS_SET:
      case OpType::REMOVE_PROCESS_SET:
        op = Status::Internal(std::string(OpTypeName(r.type)) + " is not a GPU op");
        break;
    }
    // Even after an error, wait for what was queued: the buffers belong to the framework.
    Status waited = Wait(d, tensor);
    if (timeline_->enabled())
      for (const auto& e : es) timeline_->ActivityEnd(e.request.name);
    return !op.ok() ? op : waited;
  }

 private:
  Status Get(int id, const std::string& tensor, Device** out) {
    Device& d = devices_[id];
    *out = &d;
    HVD_CUDA_CHECK(cudaSetDevice(id), tensor);
    if (d.id >= 0) return Status();
    d.id = id;
    HVD_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), tensor);
    HVD_CUDA_CHECK(cudaEventCreateWithFlags(&d.done, cudaEventDisableTiming), tensor);
    WatchSection w;
    w.what = "NCCL communicator creation";
    w.tensor = &tensor;
    WatchScope watch(w);
    Status s = NcclCommCreate(net_->comm(), id, &d.nccl, tensor);
    if (!s.ok()) d.nccl.aborted = s.message();
    return s;
  }

  // Scratch in device memory; grows, never shrinks. Safe to free the old one: every op on
  // this stream finished before the previous Execute returned.
  Status Fusion(Device* d, size_t bytes, const std::string& tensor, void** out) {
    return Grown(&d->fusion, &d->fusion_size, bytes, tensor, out);
  }
  static Status Grown(void** buf, size_t* size, size_t bytes, const std::string& tensor,
                      void** out) {
    if (bytes > *size) {
      if (*buf) HVD_CUDA_CHECK(cudaFree(*buf), tensor);
      *buf = nullptr;
      *size = 0;
      HVD_CUDA_CHECK(cudaMalloc(buf, bytes), tensor);
      *size = bytes;
    }
    *out = *buf;
    return Status();
  }

  // An output allocated now may reuse memory the framework's stream still reads: order after it.
  Status AfterFramework(const TensorEntry& e, Device* d, const std::string& tensor) {
    if (!e.stream) return Status();
    cudaEvent_t ev;
    HVD_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), tensor);
    cudaError_t rc = cudaEventRecord(ev, static_cast<cudaStream_t>(e.stream));
    if (rc == cudaSuccess) rc = cudaStreamWaitEvent(d->stream, ev, 0);
    cudaEventDestroy(ev);  // released once the recorded work completes
    if (rc != cudaSuccess)
      return CudaError("cudaEventRecord/cudaStreamWaitEvent (output after TensorFlow's stream)", rc,
                       tensor);
    return Status();
  }

  // Allocates an op's output; if that fails the op still runs into scratch (peers must not
  // block) and the allocation error is returned afterwards.
  Status Output(TensorEntry& e, const std::vector<int64_t>& shape, size_t bytes, Device* d,
                void** out, Status* alloc) {
    const std::string& tensor = e.request.name;
    *alloc = e.allocate_output(shape, out);
    if (!alloc->ok() || (!*out && bytes)) {
      if (alloc->ok())
        *alloc = Status::Internal("tensor '" + tensor + "': output allocation returned null");
      return Fusion(d, bytes, tensor, out);
    }
    return AfterFramework(e, d, tensor);
  }

  Status Wait(Device* d, const std::string& tensor) {
    HVD_CUDA_CHECK(cudaEventRecord(d->done, d->stream), tensor);
    for (int polls = 0;; ++polls) {
      const cudaError_t q = cudaEventQuery(d->done);
      if (q == cudaSuccess) return Status();
      if (q != cudaErrorNotReady) return CudaError("cudaEventQuery", q, tensor);
      if (d->nccl.comm) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(d->nccl.comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          Status s = NcclError("ncclCommGetAsyncError", async, tensor);
          // Aborting frees the stuck kernels; the communicator cannot be used again.
          NcclCommAbort(&d->nccl, s.message());
          cudaStreamSynchronize(d->stream);
          return Status::ShutDown(s.message() +
                                  " (the NCCL communicator was aborted; a peer failed or "
                                  "the network broke: GPU collectives cannot continue)");
        }
      }
      if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // buf (device) *= factor, then / `divisor` (> 1: integer Average, truncating), in host
  // memory: only where our scaling kernels cannot run (Scale).
  Status ScaleOnHost(void* buf, size_t count, DataType dtype, double factor, int64_t divisor,
                     Device* d, const std::string& tensor) {
    const size_t bytes = count * DataTypeSize(dtype);
    if (bytes == 0) return Status();
    host_scratch_.resize(bytes);
    HVD_CUDA_CHECK(
        cudaMemcpyAsync(host_scratch_.data(), buf, bytes, cudaMemcpyDeviceToHost, d->stream),
        tensor);
    Status s = Wait(d, tensor);
    if (!s.ok()) return s;
    ScaleAndAverage(host_scratch_.data(), count, dtype, factor, static_cast<int>(divisor));
    HVD_CUDA_CHECK(
        cudaMemcpyAsync(buf, host_scratch_.data(), bytes, cudaMemcpyHostToDevice, d->stream),
        tensor);
    return Wait(d, tensor);  // the scratch is reused by the next call
  }

  // A ReducePlan's own scaling step: dst = src * factor (integers then / divisor), on the device
  // with our kernel; a plain copy (or nothing) when there is nothing to scale. Where the kernels
  // cannot load (said once), through host memory: slow, but never wrong.
  Status Scale(void* dst, const void* src, size_t count, DataType dtype, double factor,
               int64_t divisor, Device* d, const std::string& tensor) {
    if (count == 0) return Status();
    const bool nothing = factor == 1.0 && (IsFloating(dtype) || divisor <= 1);
    std::string why;
    if (nothing || DeviceScaleAvailable(d->id, &why))
      return DeviceScale(dst, src, count, dtype, factor, divisor, d->stream, tensor);
    if (!host_scaling_noted_) {
      host_scaling_noted_ = true;
      HVD_LOG(WARNING, "GPU " << d->id << ": Horovod's scaling kernels cannot run (" << why
                              << "); scale factors and one-rank reductions are scaled through "
                                 "host memory instead (correct, but slower)");
    }
    if (dst != src)
      HVD_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * DataTypeSize(dtype),
                                     cudaMemcpyDeviceToDevice, d->stream),
                     tensor);
    return ScaleOnHost(dst, count, dtype, factor, divisor, d, tensor);
  }

  // As the CPU path (Operations::Average): the set's size, or, while ranks have joined and
  // HOROVOD_JOIN_AVERAGE=contributors, the ranks that submitted.
  int AverageBy(const Response& r) const {
    if (r.reduce_op != ReduceOp::AVERAGE) return 1;
    const bool by_contributors = r.contributors > 0 && GetConfig().join_average == "contributors";
    return by_contributors ? r.contributors : net_->size;
  }

  // What NCCL runs and what our kernel scales (common/nccl_defects.h): one rank never calls
  // NCCL's reductions, and a defect of the loaded NCCL is avoided.
  ReducePlan Plan(const Response& r, const Device* d) const {
    return PlanReduction(d->nccl.version, d->nccl.size, r.dtype, r.reduce_op, r.prescale,
                         r.postscale, AverageBy(r));
  }

  // `in` reduced into `out` (count elements; may be the same buffer) as `plan` says: our
  // prescale first (into `out`, never the caller's input), NCCL (or nothing, one rank), then
  // our postscale and integer division.
  Status ReduceBuffer(const void* in, void* out, size_t count, const ReducePlan& plan,
                      const Response& r, Device* d, const std::string& tensor) {
    Status s;
    const void* src = in;
    if (plan.pre != 1.0 || !plan.nccl) {
      s = Scale(out, in, count, r.dtype, plan.pre, 1, d, tensor);
      src = out;
    }
    if (s.ok() && plan.nccl)
      s = NcclAllreduce(src, out, count, r.dtype, plan.op, plan.nccl_scale, &d->nccl, d->stream,
                        tensor);
    if (s.ok()) s = Scale(out, out, count, r.dtype, plan.post, plan.divisor, d, tensor);
    return s;
  }

  Status Allreduce(const Response& r, std::vector<TensorEntry>& es, Device* d) {
    const std::string& tensor = r.names[0];
    const ReducePlan plan = Plan(r, d);
    const size_t esize = DataTypeSize(r.dtype);
    size_t total = 0;
    for (auto n : r.num_elements) total += static_cast<size_t>(n);
    // Straight from input to output (in place if equal); one rank: every tensor on its own,
    // with nothing to gather into a fusion buffer.
    if (es.size() == 1 || !plan.nccl) {
      for (size_t i = 0; i < es.size(); ++i) {
        Status s = ReduceBuffer(es[i].input, es[i].output, static_cast<size_t>(r.num_elements[i]),
                                plan, r, d, tensor);
        if (!s.ok()) return s;
      }
      return Status();
    }
    void* buf = nullptr;
    Status s = Fusion(d, total * esize, tensor, &buf);
    if (!s.ok()) return s;
    char* p = static_cast<char*>(buf);
    size_t off = 0;
    for (size_t i = 0; i < es.size(); ++i) {
      const size_t bytes = static_cast<size_t>(r.num_elements[i]) * esize;
      HVD_CUDA_CHECK(
          cudaMemcpyAsync(p + off, es[i].input, bytes, cudaMemcpyDeviceToDevice, d->stream),
          tensor);
      off += bytes;
    }
    s = ReduceBuffer(buf, buf, total, plan, r, d, tensor);
    if (!s.ok()) return s;
    off = 0;
    for (size_t i = 0; i < es.size(); ++i) {
      const size_t bytes = static_cast<size_t>(r.num_elements[i]) * esize;
      HVD_CUDA_CHECK(
          cudaMemcpyAsync(es[i].output, p + off, bytes, cudaMemcpyDeviceToDevice, d->stream),
          tensor);
      off += bytes;
    }
    return Status();
  }

  // One rank moves nothing between GPUs: its own rows, copied (NCCL is not called).
  Status CopyAlone(void* out, const void* in, size_t bytes, Device* d, const std::string& tensor) {
    if (bytes && out != in)
      HVD_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, d->stream), tensor);
    return Status();
  }

  Status Allgather(const Response& r, TensorEntry& e, Device* d) {
    std::vector<int64_t> shape = e.request.shape;
    const size_t row_bytes = RowElements(shape) * DataTypeSize(r.dtype);
    int64_t rows = 0;
    for (auto x : r.first_dims) rows += x;
    shape[0] = rows;
    void* out = nullptr;
    Status alloc;
    const size_t bytes = static_cast<size_t>(rows) * row_bytes;
    Status s = Output(e, shape, bytes, d, &out, &alloc);
    if (s.ok())
      s = d->nccl.size == 1 ? CopyAlone(out, e.input, bytes, d, r.names[0])
                            : NcclAllgather(e.input, out, row_bytes, r.first_dims, &d->nccl,
                                            d->stream, r.names[0]);
    return s.ok() ? alloc : s;
  }

  Status Broadcast(const Response& r, TensorEntry& e, Device* d) {
    const size_t bytes = static_cast<size_t>(NumElements(e.request.shape)) * DataTypeSize(r.dtype);
    if (net_->rank == r.root && e.output != e.input)
      HVD_CUDA_CHECK(cudaMemcpyAsync(e.output, e.input, bytes, cudaMemcpyDeviceToDevice, d->stream),
                     r.names[0]);
    if (d->nccl.size == 1) return Status();  // the root's data is already the result
    return NcclBroadcast(e.output, bytes, r.root, &d->nccl, d->stream, r.names[0]);
  }

  Status Alltoall(const Response& r, TensorEntry& e, Device* d) {
    std::vector<int64_t> shape = e.request.shape;
    const size_t row_bytes = RowElements(shape) * DataTypeSize(r.dtype);
    // Row counts travel over the transport (host memory) so each rank can size its output first.
    std::vector<int64_t> recv_rows(net_->size);
    net_->comm().AlltoallInt64(e.request.splits.data(), recv_rows.data());
    int64_t rows = 0;
    for (auto x : recv_rows) rows += x;
    shape[0] = rows;
    void* out = nullptr;
    Status alloc;
    const size_t bytes = static_cast<size_t>(rows) * row_bytes;
    Status s = Output(e, shape, bytes, d, &out, &alloc);
    if (s.ok())
      s = d->nccl.size == 1 ? CopyAlone(out, e.input, bytes, d, r.names[0])
                            : NcclAlltoall(e.input, out, row_bytes, e.request.splits, recv_rows,
                                           &d->nccl, d->stream, r.names[0]);
    if (e.received_splits) *e.received_splits = recv_rows;
    return s.ok() ? alloc : s;
  }

  Status Reducescatter(const Response& r, TensorEntry& e, Device* d) {
    std::vector<int64_t> shape = e.request.shape;
    const int n = net_->size;
    const int64_t rows = shape[0];
    std::vector<int64_t> rows_of(n);
    for (int q = 0; q < n; ++q) rows_of[q] = rows / n + (q < rows % n ? 1 : 0);
    shape[0] = rows_of[net_->rank];
    const size_t row_elems = RowElements(shape);
    void* out = nullptr;
    Status alloc;
    Status s = Output(e, shape, static_cast<size_t>(shape[0]) * row_elems * DataTypeSize(r.dtype),
                      d, &out, &alloc);
    if (!s.ok()) return s;
    const std::string& tensor = r.names[0];
    const size_t mine = static_cast<size_t>(shape[0]) * row_elems;
    const ReducePlan plan = Plan(r, d);
    const void* src = e.input;
    if (!plan.nccl) {  // one rank: every row is this rank's, scaled
      s = Scale(out, e.input, mine, r.dtype, plan.pre, 1, d, tensor);
    } else if (plan.pre != 1.0) {
      // This rank's shares scaled into a staging buffer (not the fusion buffer: a failed output
      // allocation makes that the output), reduced from there.
      const size_t count = static_cast<size_t>(rows) * row_elems;
      void* work = nullptr;
      s = Grown(&d->staged, &d->staged_size, count * DataTypeSize(r.dtype), tensor, &work);
      if (s.ok()) s = Scale(work, e.input, count, r.dtype, plan.pre, 1, d, tensor);
      src = work;
    }
    if (s.ok() && plan.nccl)
      s = NcclReducescatter(src, out, row_elems, rows_of, r.dtype, plan.op, plan.nccl_scale,
                            &d->nccl, d->stream, tensor);
    if (s.ok()) s = Scale(out, out, mine, r.dtype, plan.post, plan.divisor, d, tensor);
    return s.ok() ? alloc : s;
  }

  Transport* net_;
  Timeline* timeline_;
  std::map<int, Device> devices_;
  std::vector<char> host_scratch_;   // ScaleOnHost's staging
  bool host_scaling_noted_ = false;  // Scale said once why it goes through host memory
};

}  // namespace

std::unique_ptr<GpuOperations> MakeGpuOperations(Transport* net, Timeline* timeline) {
  LogGpuLibraries();  // once per process; hvd.init() may have said it already
  return std::unique_ptr<GpuOperations>(new NcclOperations(net, timeline));
}

}  // namespace hvd
