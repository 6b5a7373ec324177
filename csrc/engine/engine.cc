#include "engine/engine.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "engine/autotuner.h"
#include "engine/controller.h"
#include "engine/cpu_share.h"
#include "engine/gpu_context.h"
#include "engine/job_stats.h"
#include "engine/operations.h"
#include "engine/process_sets.h"
#include "engine/request_checks.h"
#include "engine/timeline.h"
#include "engine/transports.h"
#include "engine/watchdog.h"
#include "ops/cpu_collectives.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/transport.h"

namespace hvd {
namespace {

struct Engine {
  Config config;
  std::unique_ptr<Transport> net;  // the global set's
  MpiTransport* mpi = nullptr;     // net, when it is MPI
  Topology topo;
  TensorQueue queue;
  Timeline timeline;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<Operations> ops;
  ProcessSetTable sets;  // the others than the global one (which is the members above)
  // Names hvd.add/remove_process_set calls, alike on all ranks.
  std::atomic<int64_t> set_changes{0};
  std::unique_ptr<Autotuner> autotuner;  // rank 0 with HOROVOD_AUTOTUNE, until it is done
  JobStats stats;                        // background thread only, once it runs
  std::thread thread;
  std::atomic<bool> shutdown_requested{false};
  // After a stall shutdown the background thread waits on these for Shutdown() (EndAfterStall).
  std::mutex exit_mu;
  std::condition_variable exit_cv;
  std::string init_error;  // set if Init failed after MPI was initialized
  // start_timeline/stop_timeline from a user thread: applied by the background thread between
  // rounds (ApplyTimelineRequest), so that the timeline is only ever touched by one thread.
  std::mutex timeline_mu;
  std::condition_variable timeline_cv;
  std::atomic<uint64_t> timeline_requested{0};
  uint64_t timeline_applied = 0;  // under timeline_mu
  std::string timeline_path;      // under timeline_mu; empty: stop
  bool timeline_mark_cycles = false;
  Status timeline_status;
};

std::mutex g_mu;                    // guards g_engine across Init/Shutdown
Engine* g_engine = nullptr;         // owned; stays alive after Shutdown so late callers get errors
std::atomic<int64_t> g_spin_us{0};  // WaitSpinMicros(): set by Init, read by any caller
bool g_running = false;

// Ranks leave the final round together, so the summary's gather normally completes at once;
// the bound only keeps a rank that vanished right after it from hanging the others.
constexpr int64_t kSummaryTimeoutUs = 10 * 1000000;

// Rank 0 gathers every rank's counters and prints the summary (HOROVOD_SUMMARY). Called by
// every rank after the final round, which all of them completed.
void ReportSummary(Engine* e) {
  e->stats.end_us = NowMicros();
  e->stats.SetHost(e->net->ProcessorName());
  static_assert(JobStats::kAllreduceAlgorithms == Operations::kAllreduceAlgorithms, "one order");
  static_assert(
      JobStats::kHierarchical == static_cast<int>(Operations::AllreduceAlgorithm::HIERARCHICAL),
      "one order");
  std::memcpy(e->stats.allreduce_runs, e->ops->allreduce_runs, sizeof(e->stats.allreduce_runs));
  std::memcpy(e->stats.allgather_runs, e->ops->allgather_runs, sizeof(e->stats.allgather_runs));
  e->stats.SetHierarchyNote(e->ops->hierarchy_note);
  std::vector<char> all;
  const std::string failed =
      e->net->GatherRecordsToRoot(&e->stats, sizeof(JobStats), kSummaryTimeoutUs, &all);
  if (e->net->rank != 0) return;
  if (!failed.empty()) {
    PrintSummary({"summary skipped: " + failed});
    return;
  }
  std::vector<JobStats> ranks(e->net->size);
  std::memcpy(ranks.data(), all.data(), all.size());
  PrintSummary(SummaryLines(ranks, static_cast<int>(e->config.summary_level), e->config.link_gbps,
                            e->config.link_at_once_gbps, e->net->Name()));
}

// Background thread: the latest start/stop request, if one is new.
void ApplyTimelineRequest(Engine* e) {
  if (e->timeline_requested.load() == e->timeline_applied) return;
  std::lock_guard<std::mutex> lk(e->timeline_mu);
  e->timeline.Shutdown();
  e->timeline_status = Status();
  if (!e->timeline_path.empty())
    e->timeline_status = e->timeline.Init(e->timeline_path, e->timeline_mark_cycles);
  e->timeline_applied = e->timeline_requested.load();
  e->timeline_cv.notify_all();
}

// A start (path) or stop (empty path) request, waited for; see engine.h.
Status RequestTimeline(const std::string& path, bool mark_cycles) {
  Engine* e = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_running)
      return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
    e = g_engine;
  }
  if (e->net->rank != 0) return Status();
  std::unique_lock<std::mutex> lk(e->timeline_mu);
  e->timeline_path = path;
  e->timeline_mark_cycles = mark_cycles;
  const uint64_t mine = ++e->timeline_requested;
  e->queue.Wake();
  if (!e->timeline_cv.wait_for(lk, std::chrono::seconds(10),
                               [&] { return e->timeline_applied >= mine; }))
    return Status();
  return e->timeline_status;
}

// After a stall shutdown a rank exits at once when it calls shutdown() or ends, and by itself
// after this long otherwise (it may catch the error to save its state first).
constexpr int kStallExitGraceS = 10;
// Every rank logs the stall reason before any of them may abort the job (which kills the rest).
constexpr int64_t kStallLogBarrierUs = 2 * 1000000;

bool IsStallShutdown(const std::string& reason) {
  return reason.rfind(kStallShutdownPrefix, 0) == 0;
}

// A stall shutdown means some rank is stuck outside Horovod (its background thread still joins
// rounds, but its program never submits the op). A shutdown waits for every rank, so a rank
// that finalized would wait for the stuck one forever (issue 17, item 9): instead every rank
// logs the reason, fails its pending ops with it, flushes its timeline, and ends the job with
// the transport's Abort (MPI_Abort) as soon as its program calls shutdown() or exits, or after
// kStallExitGraceS.
[[noreturn]] void EndAfterStall(Engine* e, const std::string& reason) {
  HVD_LOG(ERROR, reason << ". This process ends the job when it calls shutdown() or exits, or in "
                        << kStallExitGraceS
                        << " s: a normal shutdown would wait for the stalled ranks forever");
  const std::string late = e->net->BarrierWithin(kStallLogBarrierUs);
  if (!late.empty()) HVD_LOG(WARNING, "after the stall shutdown, " << late);
  e->timeline.Shutdown();  // the file is complete before anything can end the process
  e->queue.FailAll(Status::ShutDown(reason));
  e->sets.FailAll(Status::ShutDown(reason));
  bool asked;
  {
    std::unique_lock<std::mutex> lk(e->exit_mu);
    asked = e->exit_cv.wait_for(lk, std::chrono::seconds(kStallExitGraceS),
                                [e] { return e->shutdown_requested.load(); });
  }
  // MPI_Abort ends every rank; the TCP transport's closes this rank's connections, and each
  // peer's next transfer with it fails, naming this rank.
  e->net->Abort(std::string("ending the job with ") + (e->mpi ? "MPI_Abort " : "an abort ") +
                (asked ? "at shutdown" : "after the grace period") +
                " after the stall shutdown, instead of waiting for the stalled ranks: " + reason);
  std::_Exit(1);  // Abort does not return; this says so to the compiler
}

size_t InFlight(Engine* e) {
  size_t n = e->queue.InFlight();
  for (auto& set : e->sets.Memberships()) n += set->queue.InFlight();
  return n;
}

// A negotiated hvd.add_process_set / remove_process_set: every rank applies it here, in the
// same round, and the rank that asked gets the verdict (the set's id, written to its output).
void ApplyProcessSetChange(Engine* e, const Response& r) {
  TensorEntry entry;
  const bool local = e->queue.Take(r.names[0], &entry);
  int32_t id = r.root;
  Status s;
  if (r.type == OpType::ADD_PROCESS_SET) {
    std::vector<int> ranks(r.first_dims.begin(), r.first_dims.end());
    s = e->sets.Add(ranks, e->net.get(), e->config, &e->timeline, &id);
    if (s.ok()) HVD_LOG(DEBUG, "process set " << id << " added: ranks " << RankList(ranks));
  } else {
    s = e->sets.Remove(id, "process set " + std::to_string(id) +
                               " was removed (hvd.remove_process_set) while this op waited");
  }
  if (!local) return;
  if (s.ok() && entry.output) std::memcpy(entry.output, &id, sizeof(id));
  entry.done(s);
}

// One round of every process set this rank is in (process_sets.h says why in this order).
void RunProcessSetRounds(Engine* e) {
  for (auto& set : e->sets.Memberships()) {
    // Autotuning (rank 0's proposals) applies to the global set only.
    ResponseList rl = set->controller->RunRound(false);
    for (const auto& resp : rl.responses) {
      const int64_t start = NowMicros();
      int64_t payload_bytes = 0;
      const Status s = set->ops->Execute(resp, &payload_bytes);
      e->stats.RecordCollective(resp, s.ok(), payload_bytes, NowMicros() - start);
    }
    if (!rl.shutdown) continue;
    // A set's controller never asks for shutdown: this is its stall inspector, or rank 0's list
    // that could not be decoded. Either way the set cannot go on.
    if (rl.shutdown_on_every_rank && IsStallShutdown(rl.shutdown_reason))
      EndAfterStall(e, rl.shutdown_reason + " (process set " + std::to_string(set->id) + ")");
    HVD_LOG(ERROR, "process set " << set->id << ": " << rl.shutdown_reason);
    set->queue.FailAll(Status::ShutDown(rl.shutdown_reason));
  }
}

// Autotuned settings arrived in this round's response list, on every rank alike: the controller
// already switched its fusion threshold; the cycle time is the loop's.
void ApplyTunedParams(Engine* e, const TunedParams& p, int64_t* cycle_us) {
  *cycle_us = static_cast<int64_t>(p.cycle_time_ms * 1000);
  if (e->autotuner) {
    e->autotuner->Applied(p, NowMicros());
    if (!e->autotuner->tuning()) e->autotuner.reset();  // closes the trial log
  }
  if (p.final)
    HVD_LOG(INFO, "autotune: this rank now runs with " << DescribeParams(p) << " (final)");
  else
    HVD_LOG(DEBUG, "autotune: this rank now tries " << DescribeParams(p));
}

// The wait before the next round. A rank with nothing in flight needs no round until its own
// next op wakes it (the others cannot finish an op without it), so after two idle rounds it
// joins the others' rounds less often. Idle rounds at the cycle time cost 7 % of a core
// (measured on 16 quiet cores, 1 ms cycle), and while the model computes, each one wakes the
// engine on the core the computation runs on: twenty of them per training step cost the
// synthetic benchmark ~4 points of its overhead on 2 cores (docs/benchmarks.md). What still
// needs rounds without work of its own (shutdown, process set changes, the stall inspector)
// waits at most kIdleWaitUs more. A joined rank has its join in flight, so it never slows.
constexpr int kIdleRoundsBeforeSlowing = 2;
constexpr int64_t kIdleWaitUs = 20000;
int64_t IdleWait(int64_t cycle_us, int idle_rounds) {
  return idle_rounds < kIdleRoundsBeforeSlowing ? cycle_us : std::max(cycle_us, kIdleWaitUs);
}

void BackgroundRounds(Engine* e) {
  // Short sleeps while polling peers must be short: the default 50 us timer slack would
  // stretch every 10 us nap.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  int64_t cycle_us = static_cast<int64_t>(e->config.cycle_time_ms * 1000);
  int64_t round_start = 0;
  bool ran_ops = false;
  int idle_rounds = 0;  // rounds in a row with nothing run and nothing in flight here
  while (true) {
    // Ops already submitted wait for the other ranks from here on, through the sleep between
    // rounds too: a rank that waits for a straggler spends most of that time asleep, not in
    // RunRound. Idle rounds are not waiting, so they are not counted.
    const int64_t waiting_since = NowMicros();
    const bool ops_waiting = InFlight(e) > 0;
    // Right after a round that ran ops the next op tends to come soon: poll for it first.
    e->queue.WaitForWork(round_start + IdleWait(cycle_us, idle_rounds),
                         ran_ops ? NowMicros() + g_spin_us.load() : 0);
    round_start = NowMicros();
    const bool round_has_ops = ops_waiting || InFlight(e) > 0;
    ApplyTimelineRequest(e);
    TunedParams proposal;
    const bool propose = e->autotuner && e->autotuner->TakeProposal(&proposal);
    ResponseList rl =
        e->controller->RunRound(e->shutdown_requested.load(), propose ? &proposal : nullptr);
    if (!rl.responses.empty()) e->timeline.MarkCycle();
    if (round_has_ops)
      e->stats.negotiation_us += NowMicros() - (ops_waiting ? waiting_since : round_start);
    int64_t round_bytes = 0;
    for (const auto& resp : rl.responses) {
      if ((resp.type == OpType::ADD_PROCESS_SET || resp.type == OpType::REMOVE_PROCESS_SET) &&
          resp.error.empty()) {
        ApplyProcessSetChange(e, resp);
        continue;
      }
      const int64_t start = NowMicros();
      int64_t payload_bytes = 0;
      const Status s = e->ops->Execute(resp, &payload_bytes);
      e->stats.RecordCollective(resp, s.ok(), payload_bytes, NowMicros() - start);
      if (s.ok()) round_bytes += payload_bytes;
    }
    if (rl.has_params)
      ApplyTunedParams(e, rl.params, &cycle_us);
    else if (e->autotuner && !rl.responses.empty())
      e->autotuner->RecordRound(round_bytes, NowMicros());
    // After running ops, the next idle round is a full cycle away: otherwise every op longer
    // than the cycle is followed by an empty round that all ranks must join, and the next
    // op's negotiation queues behind it (measured: 300-400 us per op over TCP).
    if (!rl.responses.empty()) round_start = NowMicros();
    ran_ops = !rl.responses.empty();
    idle_rounds = ran_ops || InFlight(e) > 0 ? 0 : idle_rounds + 1;
    if (rl.shutdown) {
      if (rl.shutdown_on_every_rank && IsStallShutdown(rl.shutdown_reason))
        EndAfterStall(e, rl.shutdown_reason);
      // Ranks finishing together shut down one round apart; only lost work deserves a warning.
      if (!e->shutdown_requested.load() && InFlight(e) > 0) HVD_LOG(WARNING, rl.shutdown_reason);
      e->queue.FailAll(Status::ShutDown(rl.shutdown_reason));
      e->sets.FailAll(Status::ShutDown(rl.shutdown_reason));
      // Only when every rank ends in this round: a rank ending alone would gather by itself.
      if (rl.shutdown_on_every_rank && e->config.summary_level > 0) ReportSummary(e);
      return;
    }
    RunProcessSetRounds(e);
  }
}

// The network failed under a round or a collective (a peer's process died, its connection
// broke: the TCP transport; MPI ends the job itself). The op that ran failed with the cause already
// (Operations::Execute); everything pending, and everything submitted later, fails with it as a
// HorovodInternalError, which elastic training catches to re-form the job.
void BackgroundLoop(Engine* e) {
  try {
    BackgroundRounds(e);
  } catch (const TransportError& err) {
    const std::string reason =
        std::string("Horovod stopped on rank ") + std::to_string(e->topo.rank) + ": " + err.what();
    HVD_LOG(ERROR, reason);
    e->queue.FailAll(Status::Internal(reason));
    e->sets.FailAll(Status::Internal(reason));
  }
}

}  // namespace

Status Init(uintptr_t comm_handle, const std::string& initial_sets) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_running) {
    // Same communicator (or none given): a no-op. Another one cannot take effect silently.
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
  if (g_engine && !g_engine->init_error.empty())
    return Status::InvalidArgument(
        "Horovod failed to initialize in this process and cannot be "
        "initialized again: " +
        g_engine->init_error);
  if (g_engine)
    return Status::InvalidArgument(
        "Horovod was shut down in this process and cannot be "
        "initialized again (MPI cannot be re-initialized)");
  auto e = std::make_unique<Engine>();
  std::string config_error;
  e->config = Config::FromEnvironment(&config_error);
  if (config_error.empty()) SetLogLevel(e->config.log_level);
  MpiTransport* mpi = nullptr;
  Status s = StartTransport(e->config, comm_handle, &e->net, &mpi);
  e->mpi = mpi;
  if (!s.ok()) return s;
  // Every rank learns every rank's config errors and agreed knobs, so that all fail together
  // with the same message instead of one rank failing and the others hanging or truncating.
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
  if (!mismatch.empty() || !sets_mismatch.empty()) {
    e->net->Finalize();
    e->init_error = mismatch.empty() ? sets_mismatch : mismatch;
    // Keep the dead engine: a later init() says why instead of re-initializing MPI.
    g_engine = e.release();
    return mismatch.empty() ? Status::Mismatch(sets_mismatch) : Status::InvalidArgument(mismatch);
  }
  SetLogRank(e->net->rank);
  LogGpuLibraries();  // the NCCL loaded at run time, and its known defects
  // After the check above: every rank now knows that all of them create it (a collective).
  if (e->config.summary_level > 0) e->net->CreateSummaryComm();
  e->topo = {e->net->rank,       e->net->size,       e->net->local_rank,       e->net->local_size,
             e->net->cross_rank, e->net->cross_size, e->net->threads_multiple, e->net->homogeneous,
             e->net->Name()};
  const bool shares_core = SharesCore(e->net->ranks_on_machine);
  g_spin_us = ChooseSpin(e->config.spin_wait_us, shares_core);
  HVD_LOG(DEBUG, "waits poll " << g_spin_us.load() << " us before blocking (HOROVOD_SPIN_WAIT_US="
                               << e->config.spin_wait_us
                               << "); polls yield the core: " << shares_core);
  SetDataWaitSpin(e->config.data_wait_spin_us);
  SetSpinYields(shares_core);
  // HOROVOD_TIMELINE=DYNAMIC (upstream's value): no file until start_timeline().
  e->timeline.SetTransport(e->net->Name());
  if (!e->config.timeline.empty() && e->config.timeline != "DYNAMIC" && e->net->rank == 0) {
    s = e->timeline.Init(e->config.timeline, e->config.timeline_mark_cycles);
    if (!s.ok()) HVD_LOG(WARNING, s.message() << "; continuing without a timeline");
  }
  e->controller = std::make_unique<Controller>(e->net.get(), e->config, &e->timeline, &e->queue);
  e->ops = std::make_unique<Operations>(e->net.get(), e->config, &e->timeline, &e->queue);
  // Rank 0 decides for every rank (the others apply what its response lists carry). As
  // upstream, a knob set explicitly is held at its value.
  if (e->config.autotune && e->net->rank == 0) {
    const bool fusion_fixed = e->config.IsSet("HOROVOD_FUSION_THRESHOLD");
    const bool cycle_fixed = e->config.IsSet("HOROVOD_CYCLE_TIME");
    if (fusion_fixed && cycle_fixed)
      HVD_LOG(WARNING,
              "HOROVOD_AUTOTUNE has nothing to tune: HOROVOD_FUSION_THRESHOLD and "
              "HOROVOD_CYCLE_TIME are both set, and autotune holds set knobs fixed");
    else
      e->autotuner = std::make_unique<Autotuner>(e->config, fusion_fixed, cycle_fixed);
  }
  if (!e->config.stall_check_disable) {
    // MPI_Abort from the watchdog's thread needs MPI_THREAD_MULTIPLE; TCP's Abort closes sockets.
    const bool can_abort = !e->mpi || e->net->threads_multiple;
    Transport* net = e->net.get();
    RollCall roll_call;
    if (e->net->roll_call_available()) {
      roll_call.send = [net](int to, int64_t word) { net->SendNote(to, word); };
      roll_call.poll = [net](std::vector<std::pair<int, int64_t>>* notes) {
        net->PollNotes(notes);
      };
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
  e->stats.start_us = NowMicros();
  e->thread = std::thread(BackgroundLoop, e.get());
  g_engine = e.release();
  g_running = true;
  return Status();
}

void Shutdown() {
  std::lock_guard<std::mutex> lk(g_mu);
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

bool IsInitialized() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_running;
}

Topology GetTopology() { return g_engine ? g_engine->topo : Topology(); }

int64_t WaitSpinMicros() { return g_spin_us.load(std::memory_order_relaxed); }

Status StartTimeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) return Status::InvalidArgument("start_timeline needs a file path");
  return RequestTimeline(path, mark_cycles);
}

Status StopTimeline() { return RequestTimeline("", false); }

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

namespace {

// An add or remove, queued on the global set like an op and waited for. Named by a counter
// that every rank advances alike, so that a rank adding while another removes is a mismatch
// of operations, named, instead of two tensors waiting for each other.
Status ChangeProcessSets(OpType type, std::vector<int64_t> ranks, int32_t id, std::string invalid,
                         int32_t* result) {
  Engine* e = g_engine;
  if (!e || !e->controller)
    return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
  std::vector<TensorEntry> entries(1);
  TensorEntry& en = entries[0];
  Request& r = en.request;
  r.type = type;
  r.name = "horovod.process_set_change." + std::to_string(e->set_changes++);
  r.dtype = DataType::INT32;
  r.shape = {1};
  r.splits = std::move(ranks);
  r.root = id;
  r.rank = e->topo.rank;
  r.invalid = std::move(invalid);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  int32_t out = -1;
  en.output = &out;
  en.done = [&](const Status& st) {
    std::lock_guard<std::mutex> lk(mu);
    status = st;
    done = true;
    cv.notify_all();
  };
  Status s = e->queue.Add(std::move(entries));
  if (!s.ok()) return s;
  // Bounded by the engine itself: every pending op fails at shutdown or a stall shutdown, and
  // the stall inspector names the ranks that have not made the call.
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done; });
  if (result) *result = out;
  return status;
}

}  // namespace

Status AddProcessSet(std::vector<int64_t> ranks, std::string invalid, int32_t* id) {
  std::sort(ranks.begin(), ranks.end());
  const int n = g_engine ? g_engine->topo.size : 0;
  if (!invalid.empty()) ranks.clear();  // the frontend's reason: nothing of it is used
  if (invalid.empty() && ranks.empty()) invalid = "a process set needs at least one rank";
  for (size_t i = 0; i < ranks.size() && invalid.empty(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= n)
      invalid = "process set rank " + std::to_string(ranks[i]) + " is outside [0, " +
                std::to_string(n) + ")";
    else if (i > 0 && ranks[i] == ranks[i - 1])
      invalid = "process set ranks " + ShapeString(ranks) + " name rank " +
                std::to_string(ranks[i]) + " twice";
  }
  return ChangeProcessSets(OpType::ADD_PROCESS_SET, std::move(ranks), 0, invalid, id);
}

Status RemoveProcessSet(int32_t id) {
  std::string invalid;
  if (id == 0) invalid = "the global process set (id 0) cannot be removed";
  return ChangeProcessSets(OpType::REMOVE_PROCESS_SET, {}, id, invalid, nullptr);
}

std::vector<ProcessSetInfo> ProcessSets() {
  std::vector<ProcessSetInfo> out;
  Engine* e = g_engine;
  if (!e || !e->controller) return out;
  ProcessSetInfo global;
  for (int r = 0; r < e->topo.size; ++r) global.ranks.push_back(r);
  global.rank = e->topo.rank;
  out.push_back(std::move(global));
  for (auto& set : e->sets.All()) out.push_back({set->id, set->ranks, set->rank});
  return out;
}

}  // namespace hvd
