// The one engine of a process, shared by the files that implement engine.h: engine.cc (Init,
// Shutdown, Enqueue and the queries), background_loop.cc (the background thread's rounds) and
// runtime_changes.cc (process sets added or removed and the timeline started or stopped while
// the job runs). Nothing outside those files includes it: frontends see engine.h only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/config.h"
#include "common/message.h"
#include "engine/autotuner.h"
#include "engine/controller.h"
#include "engine/engine.h"
#include "engine/job_stats.h"
#include "engine/operations.h"
#include "engine/process_sets.h"
#include "engine/tensor_queue.h"
#include "engine/timeline.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/transport.h"

namespace hvd {
namespace engine_internal {

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

// Defined in engine.cc.
extern std::mutex g_mu;   // guards g_engine across Init/Shutdown
extern Engine* g_engine;  // owned; stays alive after Shutdown so late callers get errors,
                          // until a re-init over TCP replaces it (engine.cc, Init)
extern std::atomic<int64_t> g_spin_us;  // WaitSpinMicros(): set by Init, read by any caller
extern bool g_running;

// background_loop.cc: the background thread's body, from Init until the final round.
void BackgroundLoop(Engine* e);

// runtime_changes.cc: the background thread's half of the changes user threads ask for.
// The latest timeline start/stop request, if one is new; between rounds.
void ApplyTimelineRequest(Engine* e);
// A negotiated hvd.add_process_set / remove_process_set, applied by every rank in the same round.
void ApplyProcessSetChange(Engine* e, const Response& r);

}  // namespace engine_internal
}  // namespace hvd
