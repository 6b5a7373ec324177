#include "common/engine.h"

#include <sys/prctl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "common/controller.h"
#include "common/logging.h"
#include "common/operations.h"
#include "common/timeline.h"
#include "common/watchdog.h"
#include "mpi/mpi_context.h"

namespace hvd {
namespace {

struct Engine {
  Config config;
  MpiContext mpi;
  Topology topo;
  TensorQueue queue;
  Timeline timeline;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<Operations> ops;
  std::thread thread;
  std::atomic<bool> shutdown_requested{false};
};

std::mutex g_mu;            // guards g_engine across Init/Shutdown
Engine* g_engine = nullptr;  // owned; stays alive after Shutdown so late callers get errors
bool g_running = false;

void BackgroundLoop(Engine* e) {
  // Short sleeps while polling peers must be short: the default 50 us timer slack would
  // stretch every 10 us nap.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  const int64_t cycle_us = static_cast<int64_t>(e->config.cycle_time_ms * 1000);
  int64_t round_start = 0;
  while (true) {
    e->queue.WaitForWork(round_start + cycle_us);
    round_start = NowMicros();
    ResponseList rl = e->controller->RunRound(e->shutdown_requested.load());
    for (const auto& resp : rl.responses) e->ops->Execute(resp);
    // After running ops, the next idle round is a full cycle away: otherwise every op longer
    // than the cycle is followed by an empty round that all ranks must join, and the next
    // op's negotiation queues behind it (measured: 300-400 us per op over TCP).
    if (!rl.responses.empty()) round_start = NowMicros();
    if (rl.shutdown) {
      // Ranks finishing together shut down one round apart; only lost work deserves a warning.
      if (!e->shutdown_requested.load() && e->queue.InFlight() > 0) HVD_LOG(WARNING, rl.shutdown_reason);
      e->queue.FailAll(Status::ShutDown(rl.shutdown_reason));
      return;
    }
  }
}

}  // namespace

Status Init(MPI_Comm comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_running) return Status();
  if (g_engine)
    return Status::InvalidArgument("Horovod was shut down in this process and cannot be "
                                   "initialized again (MPI cannot be re-initialized)");
  auto e = std::make_unique<Engine>();
  std::string err;
  e->config = Config::FromEnvironment(&err);
  if (!err.empty()) return Status::InvalidArgument(err);
  SetLogLevel(e->config.log_level);
  Status s = e->mpi.Init(comm, e->config.mpi_threads_disable);
  if (!s.ok()) return s;
  SetLogRank(e->mpi.rank);
  e->topo = {e->mpi.rank, e->mpi.size, e->mpi.local_rank, e->mpi.local_size,
             e->mpi.cross_rank, e->mpi.cross_size, e->mpi.threads_multiple, e->mpi.homogeneous};
  if (!e->config.timeline.empty() && e->mpi.rank == 0) {
    s = e->timeline.Init(e->config.timeline);
    if (!s.ok()) HVD_LOG(WARNING, s.message() << "; continuing without a timeline");
  }
  e->controller = std::make_unique<Controller>(&e->mpi, e->config, &e->timeline, &e->queue);
  e->ops = std::make_unique<Operations>(&e->mpi, e->config, &e->timeline, &e->queue);
  if (!e->config.stall_check_disable) {
    const bool can_abort = e->mpi.threads_multiple;  // MPI_Abort from the watchdog's thread
    GlobalWatchdog().Start(e->mpi.rank, e->config.stall_check_time_s,
                           e->config.stall_shutdown_time_s, [can_abort](const std::string& msg) {
                             HVD_LOG(ERROR, msg);
                             if (can_abort) MPI_Abort(MPI_COMM_WORLD, 1);
                             std::_Exit(1);  // mpirun then ends the other ranks
                           });
  }
  e->thread = std::thread(BackgroundLoop, e.get());
  g_engine = e.release();
  g_running = true;
  return Status();
}

void Shutdown() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_running) return;
  g_engine->shutdown_requested = true;
  g_engine->queue.Wake();
  g_engine->thread.join();
  GlobalWatchdog().Stop();
  g_engine->queue.FailAll(Status::ShutDown("Horovod has been shut down on this rank"));
  g_engine->timeline.Shutdown();
  g_engine->ops.reset();
  g_engine->mpi.Finalize();
  g_running = false;
}

bool IsInitialized() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_running;
}

Topology GetTopology() { return g_engine ? g_engine->topo : Topology(); }

const Config& GetConfig() {
  static Config defaults;
  return g_engine ? g_engine->config : defaults;
}

MPI_Comm RawComm() { return g_running ? g_engine->mpi.raw_comm() : MPI_COMM_NULL; }

Status Enqueue(std::vector<TensorEntry> entries) {
  Engine* e = g_engine;
  if (!e) return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
  const int n = e->topo.size;
  for (const auto& en : entries) {
    const Request& r = en.request;
    // Built only for an error: this loop runs for every tensor of every step.
    auto who = [&] { return "tensor '" + r.name + "' on rank " + std::to_string(e->topo.rank) + ": "; };
    if (r.name.empty()) return Status::InvalidArgument("a tensor name must not be empty");
    if (static_cast<unsigned>(r.dtype) >= kNumDataTypes)
      return Status::InvalidArgument(who() + "unsupported data type");
    bool needs_rows = r.type == OpType::ALLGATHER || r.type == OpType::ALLTOALL ||
                      r.type == OpType::REDUCESCATTER;
    if (needs_rows && r.shape.empty())
      return Status::InvalidArgument(who() + OpTypeName(r.type) +
                                     " needs a tensor with at least one dimension, got a scalar");
    if (r.type == OpType::BROADCAST && (r.root < 0 || r.root >= n))
      return Status::InvalidArgument(who() + "broadcast root rank " + std::to_string(r.root) +
                                     " is outside [0, " + std::to_string(n) + ")");
    if (r.type == OpType::ALLTOALL) {
      int64_t total = 0;
      for (auto s : r.splits) {
        if (s < 0) return Status::InvalidArgument(who() + "alltoall splits must not be negative");
        total += s;
      }
      if (static_cast<int>(r.splits.size()) != n || total != r.shape[0])
        return Status::InvalidArgument(who() + "alltoall needs one split per rank (" +
                                       std::to_string(n) + ") summing to the first dimension (" +
                                       std::to_string(r.shape[0]) + ")");
    }
  }
  return e->queue.Add(std::move(entries));
}

}  // namespace hvd
