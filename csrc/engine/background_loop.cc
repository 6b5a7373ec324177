// The background thread: one negotiation round of the global set after another, each followed
// by the rounds of the process sets this rank is in, until the round that ends the job.
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/logging.h"
#include "engine/engine_state.h"

namespace hvd {
namespace engine_internal {
namespace {

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

// Runs the global set's responses of one round: process set changes are applied, everything
// else executed and counted. Returns the payload bytes of the collectives that succeeded.
int64_t RunGlobalResponses(Engine* e, const ResponseList& rl) {
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
  return round_bytes;
}

// The round that ends the job on this rank: every pending op fails with its reason.
void EndRounds(Engine* e, const ResponseList& rl) {
  if (rl.shutdown_on_every_rank && IsStallShutdown(rl.shutdown_reason))
    EndAfterStall(e, rl.shutdown_reason);
  // Ranks finishing together shut down one round apart; only lost work deserves a warning.
  if (!e->shutdown_requested.load() && InFlight(e) > 0) HVD_LOG(WARNING, rl.shutdown_reason);
  e->queue.FailAll(Status::ShutDown(rl.shutdown_reason));
  e->sets.FailAll(Status::ShutDown(rl.shutdown_reason));
  // Only when every rank ends in this round: a rank ending alone would gather by itself.
  if (rl.shutdown_on_every_rank && e->config.summary_level > 0) ReportSummary(e);
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
    const int64_t round_bytes = RunGlobalResponses(e, rl);
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
      EndRounds(e, rl);
      return;
    }
    RunProcessSetRounds(e);
  }
}

}  // namespace

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
    TransportBroke() = true;  // before any op fails: an init() the error prompts re-forms
    e->queue.FailAll(Status::Internal(reason));
    e->sets.FailAll(Status::Internal(reason));
  }
}

}  // namespace engine_internal
}  // namespace hvd
