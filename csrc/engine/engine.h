// The engine's public C++ API, used by every frontend (pybind11 module, TensorFlow kernels).
// One engine per process: one background thread, one transport (MPI or TCP).
// Frontends include this header and headers of common/ (types, status, config), nothing else of
// the engine, transport/ or ops/ (scripts/check_layers.py enforces it): what they need is declared
// here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"
#include "common/config.h"
#include "engine/tensor_queue.h"  // TensorEntry: what a frontend enqueues

namespace hvd {

struct Topology {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool mpi_threads_multiple = false, homogeneous = true;
  std::string transport = "mpi";  // "mpi" or "tcp": what Init chose
};

// Starts the engine. The transport is HOROVOD_TRANSPORT's, or by default MPI under an MPI launcher
// and TCP where torchrun's or upstream Gloo's variables name a rendezvous (csrc/transport/).
// `mpi_comm`: an MPI communicator's handle to adopt (mpi4py's MPI._handleof), 0 for
// MPI_COMM_WORLD; MPI is initialized if needed. Idempotent while running.
// `initial_sets`: this rank's description of the process sets given to init (every rank must
// give the same; a mismatch fails init on every rank, naming them).
// Over TCP it may be called again after Shutdown, or after a TransportError ended the engine (a
// peer died; Init then shuts this rank's side down first): it forms a new world from the
// environment at that moment, with everything per-world fresh. Over MPI it refuses (MPI
// cannot be initialized twice).
Status Init(uintptr_t mpi_comm = 0, const std::string& initial_sets = "");
// Worlds this process has formed (successful Inits that started an engine): a frontend
// compares it around init() to learn whether a new world began.
int64_t WorldsFormed();
// Negotiates shutdown with the other ranks (their pending ops fail, naming this rank), stops
// the background thread, and closes the transport (finalizing MPI if Init initialized it).
// Every rank's background thread ends in the same final round; with HOROVOD_SUMMARY > 0 rank 0
// then gathers every rank's counters (waiting at most 10 s) and prints the communication
// summary to stderr.
void Shutdown();
bool IsInitialized();
// Initialized, but the background thread ended on a TransportError (a peer died; TCP): every op
// fails until Shutdown, or an Init that re-forms.
bool PeerLossEnded();
Topology GetTopology();
// How long a caller waiting for a result polls before it blocks (0: it blocks at once); chosen
// at Init from the cores this rank may use and its ranks on the host.
int64_t WaitSpinMicros();
const Config& GetConfig();
// Validates locally, then queues the entries atomically (all or none). Each entry's done()
// runs exactly once, on the background thread, with OK or a named error. A frontend that found
// an entry's arguments unusable sets request.invalid to the reason instead of failing alone:
// the entry is negotiated like any other and fails on every rank with that reason. Its dtype
// and shape are then not looked at (an input whose dtype the engine lacks: give e.g. UINT8).
// `process_set`: the id of the set the ops run in (0: every rank). Its members negotiate and
// run them among themselves; request.rank is then the rank in the set, and a broadcast's root
// is a global rank (as upstream), which must be in the set.
Status Enqueue(std::vector<TensorEntry> entries, int32_t process_set = 0);

// One op call's arguments as a frontend received them, its tensors apart. Frontends build the
// wire request of each tensor with MakeRequest, never field by field, so that every frontend
// names, groups and describes its ops alike.
struct OpArgs {
  OpType type = OpType::ALLREDUCE;
  std::string name;      // the op's name; its tensors' names follow from it (MemberName)
  bool grouped = false;  // a grouped op: its ranks must agree on the number of tensors
  ReduceOp reduce_op = ReduceOp::SUM;
  int32_t root = 0;  // broadcast: a global rank
  double prescale = 1.0, postscale = 1.0;
  std::vector<int64_t> splits;  // alltoall: rows sent to each rank
  std::string invalid;          // why the frontend refused the arguments; "": usable
  bool gpu = false;             // the tensors are in device memory
  // Callers that name every tensor themselves (the Python binding given a list): one name per
  // tensor, used as given. Empty: MemberName's.
  std::vector<std::string> names;
};
// The name of tensor i of a call of n: the op's name for a lone tensor of an op that is not
// grouped, else "<name>.<i>" (a group's members).
std::string MemberName(const std::string& name, int i, int n, bool grouped);
// Tensor i's name in `op`: op.names[i] if given, else MemberName(op.name, i, n, op.grouped).
std::string MemberName(const OpArgs& op, int i, int n);
// The wire request of tensor i of a call of n: every field of `op`, this rank's rank, the
// member name (above) and, for a grouped op, group = op.name and group_size = n; then the
// tensor's dtype and shape. A frontend that finds a tensor unusable on its own (its dtype,
// its output) sets request.invalid to the reason afterwards.
Request MakeRequest(const OpArgs& op, int i, int n, DataType dtype, std::vector<int64_t> shape);
// A grouped call of no tensors is still negotiated, so that ranks whose groups are not empty
// fail (group sizes differ) instead of waiting for it: one empty member "<group>.0" of group
// size 0 (a frontend sets group_size to 0 after MakeRequest), queued alone.
inline bool EmptyGroupMarker(const Request& r, size_t entries) {
  return !r.group.empty() && r.group_size == 0 && entries == 1 &&
         r.shape == std::vector<int64_t>{0};
}

// Process sets (process_sets.h). Both calls are collective over every rank, which must make them
// in the same order with the same arguments (negotiated: a difference is an error naming the
// ranks on each side); they block until every rank made them. `ranks`: distinct global ranks;
// `invalid`: the frontend's reason they cannot be used (non-empty: the add fails on every rank).
Status AddProcessSet(std::vector<int64_t> ranks, std::string invalid, int32_t* id);
Status RemoveProcessSet(int32_t id);
struct ProcessSetInfo {
  int32_t id = 0;
  std::vector<int> ranks;  // ascending global ranks
  int rank = -1;           // this process's rank in the set; -1: not a member
};
// Every set, the global one (id 0) first; empty before Init.
std::vector<ProcessSetInfo> ProcessSets();

// Starts writing a timeline to `path` at run time (upstream's hvd.start_timeline), replacing
// one being written; `mark_cycles` adds a CYCLE_START instant event for each negotiation round
// that ran ops. Rank 0 writes, as with HOROVOD_TIMELINE; on other ranks both calls return at
// once. The background thread (the only writer of events) applies it between rounds; the call
// returns once it did, or after 10 s if a collective holds that thread (it applies later).
Status StartTimeline(const std::string& path, bool mark_cycles);
// Stops it and closes the file (a valid JSON array); nothing to do if none is being written.
Status StopTimeline();

// What this library was built with (horovodrun --check-build); needs no Init and no GPU.
struct LinkedLibraries {
  std::string mpi_library;       // MPI_Get_library_version()
  int nccl_version = 0;          // ncclGetVersion() of the linked library: 23203 = 2.32.3; 0 = none
  int cuda_runtime_version = 0;  // cudaRuntimeGetVersion(): 12090 = 12.9; 0 = not built with CUDA
};
LinkedLibraries GetLinkedLibraries();
// The number of CUDA devices this process sees. None, or no usable driver, is an error that
// says so plainly ("no GPU visible ..."), with CUDA's own reason and what to check; a build
// without GPU operations says that instead (gpu_context.cc, gpu_stub.cc).
Status GpuDeviceCount(int* count);
// Device memory for an output whose size is known only after negotiation, for a frontend with no
// allocator of its own on the background thread (horovod.numpy's device arrays: Python's
// allocators need the GIL). GPU builds: cudaMalloc on `device`; other builds refuse it.
Status GpuAllocate(int device, size_t bytes, void** data);
void GpuFree(int device, void* data);  // any thread; null is a no-op

// Where a frontend that allocates one call's same-shape outputs as one block of host memory
// puts each (byte offsets into the block; *total: its size). Every output starts 64-byte aligned
// (as NumPy's and TensorFlow's own buffers); the tensors a fused allreduce runs its ring over
// come first, back to back in the call's order, the small ones it packs into the fusion buffer
// after them, so that chunks spanning tensors go to and from the outputs as they lie, without
// copies (ops/ring_allreduce.cc). Any layout gives the same results; this one saves copies.
std::vector<size_t> OutputBlockOffsets(const std::vector<size_t>& bytes, size_t* total);

// The transport hvd.init() would choose in this environment ("mpi" or "tcp"; engine/transports.h).
std::string TransportChoice();
// A TCP job's rendezvous, served by a launcher that is not one of its ranks (horovodrun --gloo,
// Spark and Ray drivers; the ranks get HOROVOD_RENDEZVOUS_SERVER=external): listens on
// addr:port ("" = every interface, 0 = an ephemeral port: *bound_port) in a thread of its own
// until all `size` ranks have met or `timeout_s` passed. *handle names it to Stop.
Status StartRendezvousServer(const std::string& addr, int port, int size, const std::string& secret,
                             double timeout_s, int64_t* handle, int* bound_port);
void StopRendezvousServer(int64_t handle);  // idempotent; unknown handles are ignored

// Benchmark hook (benchmarks/allreduce.py's "ring alone" line): the bare ring allreduce, a
// float32 sum of `count` elements in place, on a communicator beside the engine's, bypassing
// the queue and negotiation. Runs on the calling thread; every rank must call it.
Status RingAllreduceRaw(float* data, size_t count);

}  // namespace hvd
