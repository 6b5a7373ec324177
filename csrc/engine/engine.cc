// engine.h's API: Init and its steps, Shutdown, Enqueue, and the queries. The background
// thread's rounds are in background_loop.cc; process sets and the timeline changed at run time
// in runtime_changes.cc.
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "engine/autotuner.h"
#include "engine/controller.h"
#include "engine/cpu_share.h"
#include "engine/engine_state.h"
#include "engine/gpu_context.h"
#include "engine/operations.h"
#include "engine/request_checks.h"
#include "engine/transports.h"
#include "engine/watchdog.h"
#include "ops/cpu_collectives.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/transport.h"

namespace hvd {
namespace engine_internal {

std::mutex g_mu;
Engine* g_engine = nullptr;
std::atomic<int64_t> g_spin_us{0};
bool g_running = false;
int64_t g_worlds = 0;  // under g_mu

}  // namespace engine_internal

namespace {

using engine_internal::Engine;
using engine_internal::g_engine;
using engine_internal::g_mu;
using engine_internal::g_running;
using engine_internal::g_spin_us;
using engine_internal::g_worlds;

// Init while running: the same communicator (or none given) is a no-op; another one cannot take
// effect silently.
Status CheckSameCommunicator(uintptr_t comm_handle) {
  int cmp = MPI_IDENT;
  if (comm_handle != 0 && g_engine->mpi)
    MPI_Comm_compare((MPI_Comm)comm_handle, g_engine->mpi->mpi_comm(), &cmp);
  else if (comm_handle != 0)
    cmp = MPI_UNEQUAL;
  if (cmp != MPI_IDENT && cmp != MPI_CONGRUENT)
    return Status::InvalidArgument(
        "Horovod is already running on a communicator of " + std::to_string(g_engine->topo.size) +
        " ranks; init(comm=...) with another communicator cannot switch it (call it once, "
        "before any op; Horovod cannot be re-initialized after shutdown)");
  return Status();
}

// The engine of a new world takes the old one's place; the old one is shut down already (its
// thread joined, its transport closed), so only its memory goes. Callers on other threads must
// not race init() with ops (as upstream): they read g_engine without the lock.
void Replace(Engine* e) {
  delete g_engine;
  g_engine = e;
}

// Init after a failed Init or after Shutdown: MPI cannot be initialized twice.
Status RefuseReinit() {
  if (!g_engine->init_error.empty())
    return Status::InvalidArgument(
        "Horovod failed to initialize in this process and cannot be "
        "initialized again: " +
        g_engine->init_error);
  return Status::InvalidArgument(
      "Horovod was shut down in this process and cannot be "
      "initialized again (MPI cannot be re-initialized)");
}

// Every rank learns every rank's config errors and agreed knobs, so that all fail together
// with the same message instead of one rank failing and the others hanging or truncating.
// Then the same for the process sets given to init. On a mismatch e->init_error says why and
// the transport is finalized.
Status AgreeAcrossRanks(Engine* e, const std::string& config_error,
                        const std::string& initial_sets) {
  std::string mismatch, sets_mismatch;
  try {
    mismatch = CheckConfigAcrossRanks(e->net->AllgatherStrings(config_error),
                                      e->net->AllgatherStrings(e->config.AgreedValues()));
    if (mismatch.empty())
      sets_mismatch = InitialSetsMismatch(e->net->AllgatherStrings(initial_sets));
  } catch (const TransportError& err) {  // a peer left while the job formed (TCP)
    e->net->Finalize();
    return Status::Internal(std::string("Horovod could not start: ") + err.what());
  }
  if (mismatch.empty() && sets_mismatch.empty()) return Status();
  e->net->Finalize();
  e->init_error = mismatch.empty() ? sets_mismatch : mismatch;
  return mismatch.empty() ? Status::Mismatch(sets_mismatch) : Status::InvalidArgument(mismatch);
}

// How long waits poll before they block, from the cores this rank may use.
void ChooseWaits(Engine* e) {
  const bool shares_core = SharesCore(e->net->ranks_on_machine);
  g_spin_us = ChooseSpin(e->config.spin_wait_us, shares_core);
  HVD_LOG(DEBUG, "waits poll " << g_spin_us.load() << " us before blocking (HOROVOD_SPIN_WAIT_US="
                               << e->config.spin_wait_us
                               << "); polls yield the core: " << shares_core);
  SetDataWaitSpin(e->config.data_wait_spin_us);
  SetSpinYields(shares_core);
}

// HOROVOD_TIMELINE's file, on rank 0. HOROVOD_TIMELINE=DYNAMIC (upstream's value): no file
// until start_timeline().
void OpenConfiguredTimeline(Engine* e) {
  e->timeline.SetTransport(e->net->Name());
  if (!e->config.timeline.empty() && e->config.timeline != "DYNAMIC" && e->net->rank == 0) {
    const Status s = e->timeline.Init(e->config.timeline, e->config.timeline_mark_cycles);
    if (!s.ok()) HVD_LOG(WARNING, s.message() << "; continuing without a timeline");
  }
}

// Rank 0 decides for every rank (the others apply what its response lists carry). As
// upstream, a knob set explicitly is held at its value.
void MakeAutotuner(Engine* e) {
  if (!e->config.autotune || e->net->rank != 0) return;
  const bool fusion_fixed = e->config.IsSet("HOROVOD_FUSION_THRESHOLD");
  const bool cycle_fixed = e->config.IsSet("HOROVOD_CYCLE_TIME");
  if (fusion_fixed && cycle_fixed)
    HVD_LOG(WARNING,
            "HOROVOD_AUTOTUNE has nothing to tune: HOROVOD_FUSION_THRESHOLD and "
            "HOROVOD_CYCLE_TIME are both set, and autotune holds set knobs fixed");
  else
    e->autotuner = std::make_unique<Autotuner>(e->config, fusion_fixed, cycle_fixed);
}

// The watchdog bounds every blocking section and ends the process when one blocks too long.
void StartWatchdog(Engine* e) {
  // MPI_Abort from the watchdog's thread needs MPI_THREAD_MULTIPLE; TCP's Abort closes sockets.
  const bool can_abort = !e->mpi || e->net->threads_multiple;
  Transport* net = e->net.get();
  RollCall roll_call;
  if (e->net->roll_call_available()) {
    roll_call.send = [net](int to, int64_t word) { net->SendNote(to, word); };
    roll_call.poll = [net](std::vector<std::pair<int, int64_t>>* notes) { net->PollNotes(notes); };
  }
  GlobalWatchdog().Start(
      e->net->rank, e->net->size, e->config.stall_check_time_s, e->config.stall_shutdown_time_s,
      [can_abort, net](const std::string& msg) {
        if (can_abort) net->Abort(msg);
        HVD_LOG(ERROR, msg);
        std::_Exit(1);  // mpirun then ends the other ranks
      },
      std::move(roll_call));
}

// Shutdown's work, under g_mu (Init calls it too, before re-forming over TCP).
void ShutdownLocked() {
  if (!g_running) return;
  {
    std::lock_guard<std::mutex> exit_lk(g_engine->exit_mu);
    g_engine->shutdown_requested = true;
  }
  g_engine->exit_cv.notify_all();  // after a stall shutdown: the background thread aborts now
  g_engine->queue.Wake();
  g_engine->thread.join();
  if (g_engine->autotuner) {  // the job ended first: say so, and close the trial log
    HVD_LOG(INFO, "autotune: the job ended after " << g_engine->autotuner->scored_samples()
                                                   << " samples, before tuning finished");
    g_engine->autotuner.reset();
  }
  GlobalWatchdog().Stop();
  g_engine->queue.FailAll(Status::ShutDown("Horovod has been shut down on this rank"));
  g_engine->sets.FailAll(Status::ShutDown("Horovod has been shut down on this rank"));
  g_engine->timeline.Shutdown();
  g_engine->ops.reset();
  g_engine->sets.Clear();  // their communicators, before the global set's
  g_engine->net->Finalize();
  g_running = false;
}

// Init after Shutdown: over TCP a new world may form; MPI refuses. After an Init whose ranks
// disagreed (config, process sets) every transport refuses, saying why: the same environment
// would disagree again.
bool MayReinit() { return !g_engine->mpi && g_engine->init_error.empty(); }

}  // namespace

Status Init(uintptr_t comm_handle, const std::string& initial_sets) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_running) {
    // A peer died under a TCP job: this rank's side is over, so init re-forms (elastic).
    if (!TransportBroke() || !MayReinit()) return CheckSameCommunicator(comm_handle);
    ShutdownLocked();
  }
  if (g_engine && !MayReinit()) return RefuseReinit();
  TransportBroke() = false;  // the last world's: this one has not failed
  auto e = std::make_unique<Engine>();
  std::string config_error;
  e->config = Config::FromEnvironment(&config_error);
  if (config_error.empty()) SetLogLevel(e->config.log_level);
  MpiTransport* mpi = nullptr;
  Status s = StartTransport(e->config, comm_handle, &e->net, &mpi);
  e->mpi = mpi;
  if (!s.ok()) return s;
  s = AgreeAcrossRanks(e.get(), config_error, initial_sets);
  if (!s.ok()) {
    // Keep the dead engine: a later init() says why instead of re-initializing MPI.
    if (!e->init_error.empty()) Replace(e.release());
    return s;
  }
  SetLogRank(e->net->rank);
  LogGpuLibraries();  // the NCCL loaded at run time, and its known defects
  // After the check above: every rank now knows that all of them create it (a collective).
  if (e->config.summary_level > 0) e->net->CreateSummaryComm();
  e->topo = {e->net->rank,       e->net->size,       e->net->local_rank,       e->net->local_size,
             e->net->cross_rank, e->net->cross_size, e->net->threads_multiple, e->net->homogeneous,
             e->net->Name()};
  ChooseWaits(e.get());
  OpenConfiguredTimeline(e.get());
  e->controller = std::make_unique<Controller>(e->net.get(), e->config, &e->timeline, &e->queue);
  e->ops = std::make_unique<Operations>(e->net.get(), e->config, &e->timeline, &e->queue);
  MakeAutotuner(e.get());
  if (!e->config.stall_check_disable) StartWatchdog(e.get());
  e->stats.start_us = NowMicros();
  e->thread = std::thread(engine_internal::BackgroundLoop, e.get());
  Replace(e.release());
  g_running = true;
  ++g_worlds;
  return Status();
}

void Shutdown() {
  std::lock_guard<std::mutex> lk(g_mu);
  ShutdownLocked();
}

bool PeerLossEnded() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_running && TransportBroke();
}

int64_t WorldsFormed() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_worlds;
}

bool IsInitialized() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_running;
}

Topology GetTopology() { return g_engine ? g_engine->topo : Topology(); }

int64_t WaitSpinMicros() { return g_spin_us.load(std::memory_order_relaxed); }

const Config& GetConfig() {
  static Config defaults;
  return g_engine ? g_engine->config : defaults;
}

LinkedLibraries GetLinkedLibraries() {
  LinkedLibraries info;
  info.mpi_library = MpiLibraryVersion();
  GetGpuBuildInfo(&info);
  return info;
}

Status RingAllreduceRaw(float* data, size_t count) {
  // The comm is read without g_mu, as the frontend did before this hook moved here: a
  // benchmark does not race Init or Shutdown.
  if (!g_running)
    return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
  // TCP connections carry the engine's traffic too: the bare ring beside it needs MPI.
  if (!g_engine->mpi)
    return Status::InvalidArgument("the bare ring (benchmark hook) runs on the MPI transport only");
  Comm& comm = g_engine->net->raw();
  static RingScratch scratch;
  RingAllreduce(data, data, count, DataType::FLOAT32, ReduceOp::SUM, GetConfig().ring_chunk_bytes,
                &scratch, comm);
  return Status();
}

Status Enqueue(std::vector<TensorEntry> entries, int32_t process_set) {
  Engine* e = g_engine;
  if (!e || !e->controller)  // never initialized, or init failed
    return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
  TensorQueue* queue = &e->queue;
  int set_size = e->topo.size;
  std::shared_ptr<ProcessSet> set;  // keeps a set removed meanwhile alive until Add refuses
  if (process_set != 0) {
    const std::string what = entries.empty() ? std::string("an empty group")
                                             : "tensor '" + entries[0].request.name + "'";
    set = e->sets.Find(process_set);
    if (!set)
      return Status::InvalidArgument(what + ": there is no process set with id " +
                                     std::to_string(process_set) + " (never added, or removed)");
    if (set->rank < 0)
      return Status::InvalidArgument(what + ": rank " + std::to_string(e->topo.rank) +
                                     " is not in process set " + std::to_string(process_set) +
                                     " (ranks " + RankList(set->ranks) +
                                     "); only its members may submit ops to it");
    queue = &set->queue;
    set_size = static_cast<int>(set->ranks.size());
  }
  // A group is queued in one call (so that its members are negotiated together and a failure
  // can reach all of them): a frontend's contract, checked here.
  for (const auto& en : entries)
    if (!en.request.group.empty() && !EmptyGroupMarker(en.request, entries.size()) &&
        (en.request.group_size != static_cast<int32_t>(entries.size()) ||
         en.request.group != entries[0].request.group))
      return Status::InvalidArgument("tensor '" + en.request.name + "': group '" +
                                     en.request.group + "' must be enqueued whole, in one call");
  for (auto& en : entries) {
    Request& r = en.request;
    // Without a name or a known dtype the request cannot even be negotiated: fail here.
    if (r.name.empty()) return Status::InvalidArgument("a tensor name must not be empty");
    if (static_cast<unsigned>(r.dtype) >= kNumDataTypes)
      return Status::InvalidArgument("tensor '" + r.name + "': unsupported data type");
    // Values the wire format refuses (see message.cc): they could not be negotiated either.
    if (static_cast<unsigned>(r.type) >= kNumOpTypes ||
        static_cast<unsigned>(r.reduce_op) >= kNumReduceOps)
      return Status::InvalidArgument("tensor '" + r.name + "': unknown op type or reduce op");
    // Anything else is negotiated as invalid, so that every rank fails with the reason. A
    // reason the frontend found (arguments it could not even convert, an input dtype it cannot
    // hand over) comes first.
    if (set) {
      r.rank = set->rank;
      // Upstream's convention: the root is a global rank (hvd.rank()); the set's ops use its
      // rank in the set.
      if (r.type == OpType::BROADCAST && r.invalid.empty()) {
        auto it = std::find(set->ranks.begin(), set->ranks.end(), r.root);
        if (it == set->ranks.end())
          r.invalid = "broadcast root rank " + std::to_string(r.root) + " is not in process set " +
                      std::to_string(set->id) + " (ranks " + RankList(set->ranks) + ")";
        else
          r.root = static_cast<int32_t>(it - set->ranks.begin());
      }
    }
    if (r.invalid.empty()) r.invalid = InvalidArguments(r, set_size);
    // Ordered after the framework's stream here, on its thread, while that stream's queue still
    // ends with the kernels that produce the input.
    if (r.gpu && r.invalid.empty()) r.invalid = PrepareGpuEntry(&en);
  }
  Status s = queue->Add(std::move(entries));
  if (set) e->queue.Wake();  // the background thread waits on the global queue only
  return s;
}

}  // namespace hvd
