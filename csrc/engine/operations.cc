#include "engine/operations.h"

#include <cstdlib>
#include <cstring>

#include "common/logging.h"
#include "common/reduce_kernels.h"
#include "engine/engine.h"
#include "engine/fusion.h"
#include "engine/watchdog.h"

namespace hvd {
namespace {

// Timeline and watchdog name of each AllreduceAlgorithm, in its order.
const char* const kAllreduceActivity[] = {"MPI_ALLREDUCE",          "DIRECT_ALLREDUCE",
                                          "RING_ALLREDUCE",         "ADASUM_ALLREDUCE",
                                          "HIERARCHICAL_ALLREDUCE", "EAGER_ALLREDUCE"};

// A fused ring runs over the tensors themselves for tensors of at least this many bytes;
// smaller ones are packed into the fusion buffer, which travels as one more piece. The ring
// copies the runs of small pieces that span tensors through scratch (ops/ring_allreduce.cc);
// packing the small ones once costs 2 B of copies against up to 3(n-1)/n B for chunks of
// scattered pieces at n ranks, and 100k one-element tensors would be 100k pieces to walk per
// chunk. A model's step mixes both (convolution kernels and the many small biases and norm
// parameters), so each tensor is decided on its own.
constexpr size_t kMinPieceBytes = 16 << 10;

// Whether a hierarchical collective runs under `knob` ("auto", "1" or "0"), and why (not).
bool ResolveHierarchy(const Transport& m, const std::string& env, const std::string& knob,
                      std::string* why) {
  const std::string shape =
      std::to_string(m.num_hosts) + " host(s) x " + std::to_string(m.local_size) + " rank(s)";
  if (knob == "0") {
    *why = env + "=0";
    return false;
  }
  if (!m.homogeneous) {
    *why = "hosts hold " + std::to_string(m.min_local_size) + " to " +
           std::to_string(m.max_local_size) +
           " ranks each; hierarchical needs the same number on every host, the flat ring runs";
    return false;
  }
  if (knob == "auto" && (m.cross_size < 2 || m.local_size < 2)) {
    *why = shape + ": nothing to gain over the flat ring";
    return false;
  }
  *why = shape;
  return true;
}

}  // namespace

std::vector<size_t> OutputBlockOffsets(const std::vector<size_t>& bytes, size_t* total) {
  std::vector<size_t> offsets(bytes.size());
  size_t at = 0;
  for (bool pieces : {true, false})
    for (size_t i = 0; i < bytes.size(); ++i)
      if ((bytes[i] >= kMinPieceBytes) == pieces) {
        offsets[i] = at;
        at += RoundUp64(bytes[i]);
      }
  *total = at;
  return offsets;
}

std::atomic<bool>& TransportBroke() {
  static std::atomic<bool> broke{false};
  return broke;
}

Operations::Operations(Transport* net, const Config& config, Timeline* timeline, TensorQueue* queue)
    : net_(net), config_(config), timeline_(timeline), queue_(queue) {
  std::string why_ar, why_ag;
  hierarchical_allreduce_ = ResolveHierarchy(*net, "HOROVOD_HIERARCHICAL_ALLREDUCE",
                                             config.hierarchical_allreduce, &why_ar);
  hierarchical_allgather_ = ResolveHierarchy(*net, "HOROVOD_HIERARCHICAL_ALLGATHER",
                                             config.hierarchical_allgather, &why_ag);
  hierarchy_note = std::string("hierarchical allreduce ") +
                   (hierarchical_allreduce_ ? "on" : "off") + " (" + why_ar + "), allgather " +
                   (hierarchical_allgather_ ? "on" : "off") + " (" + why_ag + ")";
  layout_.rank = net->rank;
  layout_.num_hosts = net->num_hosts;
  layout_.host_of = net->host_of;
  layout_.local_rank_of = net->local_rank_of;
  layout_.cross_members = net->cross_members;
  // Asked for and refused: say so once, on the global set's rank 0.
  const bool forced_off = (config.hierarchical_allreduce == "1" && !hierarchical_allreduce_) ||
                          (config.hierarchical_allgather == "1" && !hierarchical_allgather_);
  if (net->rank == 0 && net->world_ranks.empty()) {
    if (forced_off)
      HVD_LOG(WARNING, hierarchy_note);
    else
      HVD_LOG(INFO, hierarchy_note);
  }
}

Operations::~Operations() { AlignedFree(fusion_); }

void* Operations::FusionBuffer(size_t bytes) {
  if (bytes > fusion_size_) {
    AlignedFree(fusion_);
    fusion_ = AlignedAlloc(bytes);
    ZeroWithProgress(fusion_, bytes);  // fault pages in once, not in every collective
    fusion_size_ = bytes;
  }
  return fusion_;
}

WatchSection Operations::Watch(const Response& r, const char* what, bool ring) const {
  WatchSection w;
  w.what = what;
  w.tensor = &r.names[0];
  w.more_tensors = static_cast<int>(r.names.size()) - 1;
  if (ring) {  // the ring blocks only on its two neighbours
    w.recv_from = net_->WorldRank((net_->rank + net_->size - 1) % net_->size);
    w.send_to = net_->WorldRank((net_->rank + 1) % net_->size);
  }
  return w;
}

void Operations::Activity(const std::vector<TensorEntry>& es, const char* name) {
  if (timeline_->enabled())
    for (const auto& e : es) timeline_->ActivityStart(e.request.name, name);
}

void Operations::EndActivity(const std::vector<TensorEntry>& es) {
  if (timeline_->enabled())
    for (const auto& e : es) timeline_->ActivityEnd(e.request.name);
}

Status Operations::Execute(const Response& r, int64_t* payload_bytes) {
  *payload_bytes = 0;
  if (r.type == OpType::JOIN && r.error.empty()) return CompleteJoin(r);
  if (!r.error.empty()) return FailResponse(r);
  std::vector<TensorEntry> entries(r.names.size());
  std::vector<std::vector<char>> zeros;  // a joined rank's part of an allreduce
  Status s = TakeEntries(r, &entries, &zeros);
  if (!s.ok()) return s;
  // Shapes were checked at Enqueue, so these products fit in int64.
  for (const auto& e : entries)
    *payload_bytes +=
        NumElements(e.request.shape) * static_cast<int64_t>(DataTypeSize(e.request.dtype));
  if (timeline_->enabled())
    for (const auto& e : entries) timeline_->OpStart(e.request.name, r.type);
  std::string broken;  // a TransportError's text: the network failed under this op
  int broken_peer = -1;
  s = RunCollective(r, entries, &broken, &broken_peer);
  if (timeline_->enabled())
    for (const auto& e : entries) timeline_->OpEnd(e.request.name);
  if (!broken.empty()) TransportBroke() = true;
  for (auto& e : entries) e.done(s);
  if (!broken.empty()) throw TransportError(broken, broken_peer);
  return s;
}

Status Operations::CompleteJoin(const Response& r) {
  // Every rank has joined: join() returns the last rank to join, written to its output.
  TensorEntry entry;
  if (queue_->Take(r.names[0], &entry)) {
    if (entry.output) std::memcpy(entry.output, &r.root, sizeof(int32_t));
    entry.done(Status());
  }
  return Status();
}

Status Operations::FailResponse(const Response& r) {
  // A failed group's members reach every rank, also those that never submitted some of them
  // (controller.cc, FailGroupsAtRoot): only the ones present here fail here.
  const Status s =
      r.error_is_invalid_argument ? Status::InvalidArgument(r.error) : Status::Mismatch(r.error);
  TensorEntry entry;
  for (const auto& name : r.names)
    if (queue_->Take(name, &entry)) entry.done(s);
  return s;
}

Status Operations::TakeEntries(const Response& r, std::vector<TensorEntry>* entries,
                               std::vector<std::vector<char>>* zeros) {
  if (r.contributors > 0) zeros->reserve(r.names.size());
  for (size_t i = 0; i < r.names.size(); ++i) {
    if (r.contributors > 0 && !queue_->Peek(r.names[i])) {
      // This rank has joined (hvd.join) and adds zeros; its result is dropped.
      TensorEntry& z = (*entries)[i];
      z.request.name = r.names[i];
      z.request.type = r.type;
      z.request.dtype = r.dtype;
      z.request.shape = {r.num_elements[i]};
      zeros->emplace_back(static_cast<size_t>(r.num_elements[i]) * DataTypeSize(r.dtype), 0);
      z.input = zeros->back().data();
      z.output = zeros->back().data();
      z.done = [](const Status&) {};
      continue;
    }
    if (!queue_->Take(r.names[i], &(*entries)[i])) {
      // Only possible if the engine is failing everything (shutdown raced this response): the
      // entries taken so far must still complete.
      HVD_LOG(DEBUG, "response for '" << r.names[i] << "' has no local entry");
      const Status gone =
          Status::ShutDown("Horovod is shutting down; '" + r.names[i] + "' was no longer pending");
      for (size_t j = 0; j < i; ++j) (*entries)[j].done(gone);
      return gone;
    }
  }
  return Status();
}

Status Operations::RunCollective(const Response& r, std::vector<TensorEntry>& entries,
                                 std::string* broken, int* broken_peer) {
  Status s;
  try {
    if (r.gpu) {
      if (!gpu_) gpu_ = MakeGpuOperations(net_, timeline_);
      // Unreachable without GPU operations: such entries are refused at Enqueue (gpu_stub.cc).
      s = gpu_ ? gpu_->Execute(r, entries)
               : Status::Internal("GPU response in a build without GPU operations");
    } else
      switch (r.type) {
        case OpType::ALLREDUCE: s = Allreduce(r, entries); break;
        case OpType::ALLGATHER: s = Allgather(r, entries[0]); break;
        case OpType::BROADCAST: s = Broadcast(r, entries[0]); break;
        case OpType::ALLTOALL: s = Alltoall(r, entries[0]); break;
        case OpType::REDUCESCATTER: s = Reducescatter(r, entries[0]); break;
        case OpType::JOIN:             // handled above
        case OpType::ADD_PROCESS_SET:  // by the engine's loop (background_loop.cc)
        case OpType::REMOVE_PROCESS_SET:
          s = Status::Internal(std::string(OpTypeName(r.type)) + " reached the collectives");
          break;
      }
  } catch (const TransportError& err) {
    // The op's entries are in hand: they fail here, once, with the cause; the engine then stops
    // (background_loop.cc), failing everything else.
    *broken = err.what();
    *broken_peer = err.peer();
    s = Status::Internal(std::string(OpTypeName(r.type)) + " of '" + r.names[0] + "'" +
                         (r.names.size() > 1
                              ? " and " + std::to_string(r.names.size() - 1) + " more tensor(s)"
                              : "") +
                         " failed: " + *broken);
  }
  return s;
}

void Operations::Average(void* buf, size_t count, const Response& r) {
  // While ranks have joined (contributors > 0): by the set's size, their zeros counted, as
  // upstream, or by the ranks that submitted (HOROVOD_JOIN_AVERAGE=contributors).
  const bool by_contributors = r.contributors > 0 && config_.join_average == "contributors";
  const int n = by_contributors ? r.contributors : net_->size;
  ScaleAndAverage(buf, count, r.dtype, r.postscale, r.reduce_op == ReduceOp::AVERAGE ? n : 1);
}

void Operations::AllreduceBuffer(const void* src, void* dst, size_t count, const Response& r,
                                 AllreduceAlgorithm algo) {
  if (r.prescale != 1.0) {  // scale a copy: the input belongs to the caller
    if (src != dst) CopyWithProgress(dst, src, count * DataTypeSize(r.dtype));
    ScaleInPlace(dst, count, r.dtype, r.prescale);
    src = dst;
  }
  switch (algo) {
    case AllreduceAlgorithm::MPI:
      if (net_->comm().NativeAllreduce(src, dst, count, r.dtype, r.reduce_op)) break;
      // A transport without MPI_Allreduce (HOROVOD_CPU_OPERATIONS=mpi over TCP): the ring.
      RingAllreduce(src, dst, count, r.dtype, r.reduce_op, config_.ring_chunk_bytes, &scratch_,
                    net_->comm(), [&](void* seg, size_t n) { Average(seg, n, r); });
      return;
    case AllreduceAlgorithm::DIRECT:
      DirectAllreduce(src, dst, count, r.dtype, r.reduce_op, &scratch_, net_->comm());
      break;
    case AllreduceAlgorithm::RING:
      // Scales only this rank's segment, before the allgather spreads it.
      RingAllreduce(src, dst, count, r.dtype, r.reduce_op, config_.ring_chunk_bytes, &scratch_,
                    net_->comm(), [&](void* seg, size_t n) { Average(seg, n, r); });
      return;
    case AllreduceAlgorithm::HIERARCHICAL:
      HierarchicalAllreduce(src, dst, count, r.dtype, r.reduce_op, config_.ring_chunk_bytes,
                            &scratch_, net_->local(), net_->cross(),
                            [&](void* seg, size_t n) { Average(seg, n, r); });
      return;
    case AllreduceAlgorithm::ADASUM:
      if (src != dst) CopyWithProgress(dst, src, count * DataTypeSize(r.dtype));
      AdasumAllreduce(dst, r.num_elements, r.dtype, &scratch_, net_->comm());
      break;
    case AllreduceAlgorithm::EAGER:
      // Never chosen for a buffer: eager responses arrive with their data (AllreduceEager).
      // Reaching here would return an unreduced buffer as the result: stop instead.
      HVD_LOG(ERROR, "internal error: an eager allreduce reached the buffer algorithms");
      std::abort();
  }
  Average(dst, count, r);  // Adasum: postscale only
}

Operations::AllreduceAlgorithm Operations::ChooseAllreduce(size_t count, DataType dtype) const {
  if (config_.cpu_operations == "mpi") return AllreduceAlgorithm::MPI;
  const bool small =
      static_cast<int64_t>(count * DataTypeSize(dtype)) <= config_.small_allreduce_bytes &&
      net_->size <= 64;
  if (small) return AllreduceAlgorithm::DIRECT;
  return hierarchical_allreduce_ ? AllreduceAlgorithm::HIERARCHICAL : AllreduceAlgorithm::RING;
}

Status Operations::AllreduceWidened(const Response& r, std::vector<TensorEntry>& es) {
  Response wide = r;
  wide.dtype = DataType::INT64;
  size_t total = 0;
  for (auto n : r.num_elements) total += static_cast<size_t>(n);
  const AllreduceAlgorithm algo = ChooseAllreduce(total, wide.dtype);
  const char* activity = kAllreduceActivity[static_cast<int>(algo)];
  ++allreduce_runs[static_cast<int>(algo)];
  WatchScope watch(Watch(r, activity, algo == AllreduceAlgorithm::RING));
  int64_t* buf = static_cast<int64_t*>(FusionBuffer(total * sizeof(int64_t)));
  Activity(es, "WIDEN_TO_INT64");
  PackFusionBuffer(es, r.num_elements, r.dtype, /*widen=*/true, buf);
  EndActivity(es);
  Activity(es, activity);
  AllreduceBuffer(buf, buf, total, wide, algo);
  EndActivity(es);
  UnpackFusionBuffer(buf, r.num_elements, r.dtype, /*widen=*/true, es);
  return Status();
}

Status Operations::AllreduceEager(const Response& r, std::vector<TensorEntry>& es) {
  // Every rank's contribution is here: reduce them in rank order, as the direct exchange does,
  // so that every rank computes the same bits.
  ++allreduce_runs[static_cast<int>(AllreduceAlgorithm::EAGER)];
  const size_t count = static_cast<size_t>(r.num_elements[0]);
  void* out = es[0].output;
  Activity(es, kAllreduceActivity[static_cast<int>(AllreduceAlgorithm::EAGER)]);
  std::memcpy(out, r.eager_parts[0], count * DataTypeSize(r.dtype));
  for (size_t q = 1; q < r.eager_parts.size(); ++q)
    ReduceInto(out, r.eager_parts[q], count, r.dtype, r.reduce_op);
  Average(out, count, r);
  EndActivity(es);
  return Status();
}

Status Operations::Allreduce(const Response& r, std::vector<TensorEntry>& es) {
  if (!r.eager_parts.empty()) return AllreduceEager(r, es);
  size_t total = 0;
  for (auto n : r.num_elements) total += static_cast<size_t>(n);
  // Every rank's tensors are empty (the shapes were agreed): nothing to exchange or write.
  if (total == 0) return Status();
  if (AveragesWidened(r.dtype, r.reduce_op)) return AllreduceWidened(r, es);
  const size_t esize = DataTypeSize(r.dtype);
  // One decision per response: the timeline label and the dispatch cannot disagree. Adasum
  // responses fuse (with each other only: the op is part of fusion's key), and the tensor
  // boundaries go along (r.num_elements): each tensor is combined as a vector of its own.
  const AllreduceAlgorithm algo = r.reduce_op == ReduceOp::ADASUM ? AllreduceAlgorithm::ADASUM
                                                                  : ChooseAllreduce(total, r.dtype);
  const char* activity = kAllreduceActivity[static_cast<int>(algo)];
  ++allreduce_runs[static_cast<int>(algo)];
  WatchScope watch(Watch(r, activity, algo == AllreduceAlgorithm::RING));
  if (es.size() == 1) {
    // A lone tensor goes straight from its input to its output: no fusion-buffer copies.
    TensorEntry& e = es[0];
    Activity(es, activity);
    AllreduceBuffer(e.input, e.output, total, r, algo);
    EndActivity(es);
    return Status();
  }
  const bool ring = algo == AllreduceAlgorithm::RING || algo == AllreduceAlgorithm::HIERARCHICAL;
  // Not when prescaled: that would write the inputs, which belong to the caller. The other
  // algorithms take one contiguous buffer.
  if (ring && r.prescale == 1.0) return AllreduceTensorPieces(r, es, algo, activity);
  void* buf = FusionBuffer(total * esize);
  Activity(es, "MEMCPY_IN_FUSION_BUFFER");
  PackFusionBuffer(es, r.num_elements, r.dtype, /*widen=*/false, buf);
  EndActivity(es);
  Activity(es, activity);
  AllreduceBuffer(buf, buf, total, r, algo);
  EndActivity(es);
  Activity(es, "MEMCPY_OUT_FUSION_BUFFER");
  UnpackFusionBuffer(buf, r.num_elements, r.dtype, /*widen=*/false, es);
  EndActivity(es);
  return Status();
}

Status Operations::AllreduceTensorPieces(const Response& r, std::vector<TensorEntry>& es,
                                         AllreduceAlgorithm algo, const char* activity) {
  // The ring runs over the tensors themselves: no copies into the fusion buffer and back,
  // except for the tensors under kMinPieceBytes, packed there as one piece (the first). Every
  // rank has the same response, so every rank cuts the same pieces.
  const size_t esize = DataTypeSize(r.dtype);
  TensorPieces pieces;
  std::vector<size_t> small;  // the packed tensors, in order
  size_t small_count = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    const size_t n = static_cast<size_t>(r.num_elements[i]);
    if (n * esize < kMinPieceBytes) {
      small.push_back(i);
      small_count += n;
      continue;
    }
    pieces.src.push_back(es[i].input);
    pieces.dst.push_back(es[i].output);
    pieces.count.push_back(n);
  }
  char* const packed =
      small.empty() ? nullptr : static_cast<char*>(FusionBuffer(small_count * esize));
  if (packed) {
    Activity(es, "MEMCPY_IN_FUSION_BUFFER");
    char* p = packed;
    for (size_t i : small) {
      const size_t bytes = static_cast<size_t>(r.num_elements[i]) * esize;
      std::memcpy(p, es[i].input, bytes);
      p += bytes;
    }
    EndActivity(es);
    pieces.src.insert(pieces.src.begin(), packed);
    pieces.dst.insert(pieces.dst.begin(), packed);
    pieces.count.insert(pieces.count.begin(), small_count);
  }
  const SegmentFn finish = [&](void* seg, size_t n) { Average(seg, n, r); };
  Activity(es, activity);
  if (algo == AllreduceAlgorithm::RING)
    RingAllreducePieces(pieces, r.dtype, r.reduce_op, config_.ring_chunk_bytes, &scratch_,
                        net_->comm(), finish);
  else
    HierarchicalAllreducePieces(pieces, r.dtype, r.reduce_op, config_.ring_chunk_bytes, &scratch_,
                                net_->local(), net_->cross(), finish);
  EndActivity(es);
  if (packed) {
    Activity(es, "MEMCPY_OUT_FUSION_BUFFER");
    const char* p = packed;
    for (size_t i : small) {
      const size_t bytes = static_cast<size_t>(r.num_elements[i]) * esize;
      std::memcpy(es[i].output, p, bytes);
      p += bytes;
    }
    EndActivity(es);
  }
  return Status();
}

Status Operations::Allgather(const Response& r, TensorEntry& e) {
  std::vector<int64_t> shape = e.request.shape;
  const size_t row_elems = RowElements(shape);
  int64_t rows = 0;
  for (auto d : r.first_dims) rows += d;
  shape[0] = rows;
  // Watched from here: allocating and filling the output is this rank's local work, which
  // its peers wait for.
  const bool hier = hierarchical_allgather_;
  const char* activity = hier ? "HIERARCHICAL_ALLGATHER" : "RING_ALLGATHER";
  ++allgather_runs[hier ? 1 : 0];
  WatchScope watch(Watch(r, activity, !hier));
  void* out = nullptr;
  Status s = e.allocate_output(shape, &out);
  std::vector<char> discard;
  if (!s.ok())  // still take part, so that no peer blocks (sizes were checked at negotiation)
    out = DiscardBuffer(&discard, rows * row_elems * DataTypeSize(r.dtype), "ALLGATHER output");
  if (timeline_->enabled()) timeline_->ActivityStart(e.request.name, activity);
  const size_t row_bytes = row_elems * DataTypeSize(r.dtype);
  if (hier)
    HierarchicalAllgather(e.input, out, row_bytes, r.first_dims, layout_, net_->local(),
                          net_->cross());
  else
    hvd::Allgather(e.input, out, row_bytes, r.first_dims, net_->comm());
  if (timeline_->enabled()) timeline_->ActivityEnd(e.request.name);
  return s;
}

Status Operations::Broadcast(const Response& r, TensorEntry& e) {
  size_t bytes = static_cast<size_t>(NumElements(e.request.shape)) * DataTypeSize(r.dtype);
  // Named after what runs it: MPI_Bcast under MPI, the transport's pipelined chain over TCP.
  const char* activity = net_->comm().NativeBroadcast() ? "MPI_BCAST" : "CHAIN_BCAST";
  WatchScope watch(Watch(r, activity, false));
  if (net_->rank == r.root && e.output != e.input) CopyWithProgress(e.output, e.input, bytes);
  if (timeline_->enabled()) timeline_->ActivityStart(e.request.name, activity);
  hvd::Broadcast(e.output, bytes, r.root, net_->comm());
  if (timeline_->enabled()) timeline_->ActivityEnd(e.request.name);
  return Status();
}

Status Operations::Alltoall(const Response& r, TensorEntry& e) {
  std::vector<int64_t> shape = e.request.shape;
  const size_t row_elems = RowElements(shape);
  std::vector<int64_t> recv_rows;
  Status s;
  WatchScope watch(Watch(r, "ALLTOALL", false));
  if (timeline_->enabled()) timeline_->ActivityStart(e.request.name, "ALLTOALL");
  hvd::Alltoall(
      e.input, row_elems * DataTypeSize(r.dtype), e.request.splits, &recv_rows,
      [&](int64_t rows) -> void* {
        shape[0] = rows;
        void* out = nullptr;
        s = e.allocate_output(shape, &out);
        return s.ok() ? out : nullptr;
      },
      net_->comm());
  if (timeline_->enabled()) timeline_->ActivityEnd(e.request.name);
  if (e.received_splits) *e.received_splits = recv_rows;
  return s;
}

Status Operations::Reducescatter(const Response& r, TensorEntry& e) {
  std::vector<int64_t> shape = e.request.shape;
  const size_t count = static_cast<size_t>(NumElements(shape));
  const size_t row_elems = RowElements(shape);
  // Rows per rank from the first dimension itself: with rows of zero elements the element
  // segments are all empty, but the output still has its share of rows.
  const int n = net_->size, rank = net_->rank;
  const int64_t rows = shape[0];
  shape[0] = rows / n + (rank < rows % n ? 1 : 0);
  const size_t mine = static_cast<size_t>(shape[0]) * row_elems;
  WatchScope watch(Watch(r, "RING_REDUCESCATTER", true));  // the local steps below included
  void* out = nullptr;
  Status s = e.allocate_output(shape, &out);
  // Integer Average goes through int64 (no wrap before the division), like allreduce.
  const bool widen = AveragesWidened(r.dtype, r.reduce_op);
  Response wide = r;
  if (widen) wide.dtype = DataType::INT64;
  const size_t esize = DataTypeSize(wide.dtype);
  std::vector<char> discard, wide_result;
  void* result = out;
  if (!s.ok())
    result = DiscardBuffer(&discard, mine * esize, "REDUCESCATTER output");
  else if (widen)
    result = DiscardBuffer(&wide_result, mine * esize, "REDUCESCATTER int64 output");
  void* work = FusionBuffer(count * esize);
  const void* src = e.input;
  if (widen) {
    WidenToInt64(e.input, r.dtype, static_cast<int64_t*>(work), count);
    src = work;
  }
  if (r.prescale != 1.0) {
    if (src != work) CopyWithProgress(work, e.input, count * esize);
    ScaleInPlace(work, count, wide.dtype, r.prescale);
    src = work;
  }
  if (timeline_->enabled()) timeline_->ActivityStart(e.request.name, "RING_REDUCESCATTER");
  hvd::Reducescatter(src, work, count, row_elems, wide.dtype, r.reduce_op, config_.ring_chunk_bytes,
                     &scratch_, net_->comm(), result);
  if (timeline_->enabled()) timeline_->ActivityEnd(e.request.name);
  Average(result, mine, wide);
  if (s.ok() && widen) NarrowFromInt64(static_cast<int64_t*>(result), r.dtype, out, mine);
  return s;
}

}  // namespace hvd
