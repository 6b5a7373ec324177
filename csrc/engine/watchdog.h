// Bounds the background thread's blocking sections: negotiation rounds and collectives, which
// wait inside MPI where no timeout can be set. "Blocked" means no progress: a section in which
// neither this rank nor a peer does anything for the stall check time is reported with what it
// waits for (the op, the tensor, and the ranks that have not reached it), again every period;
// with a shutdown time set, a section without progress that long ends the job: a blocked MPI
// transfer cannot be unwound, so failing the ops and carrying on is not possible. A long
// operation that keeps moving data is never reported.
//
// Progress is local work as well as data moved: collectives and copies call WatchProgress()
// as pieces complete. A rank waiting on a peer that is busy with local work (copying a 1 GB
// segment into fresh pages, say) sees none of it, so the peer tells it (below).
//
// The roll call (one-word notes on a channel of their own: an MPI communicator, or a UDP socket
// per rank beside the TCP mesh, tcp/roll_call_udp.h; the transport's SendNote/PollNotes, which
// this thread alone calls, while the engine's thread may be blocked): every rank enters the same
// sections in the same order (negotiation rounds and the collectives they decide), so a
// section's sequence number is the same everywhere.
//   - A rank whose section has made no progress for a quarter of the check time tells every
//     peer "I am blocked in section s". The peers that never say so are the ones that have not
//     reached it or are stopped: the report names them.
//   - A rank in section s that has made progress of its own lately answers such a note (at
//     once, or as soon as it works in s) with "I am working in section s", which the blocked
//     rank counts as progress; that rank asks again after another quarter of no progress. Only
//     a rank's own progress earns an answer, so two blocked ranks cannot keep each other alive.
// Only blocked ranks, and those answering them, send anything: the steady state costs one
// uncontended lock and a few stores per section, plus one probe per 100 ms tick.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/watch_progress.h"  // WatchProgress(): what collectives call as data moves

namespace hvd {

struct WatchSection {
  const char* what = "";                // e.g. "RING_ALLREDUCE", "negotiation round"
  const std::string* tensor = nullptr;  // first tensor of the op, if any (outlives the section)
  int more_tensors = 0;                 // fused with it
  int recv_from = -1, send_to = -1;     // ring neighbours; -1: every rank
};

// The roll call's channel (MPI or UDP); absent where the transport has none: MPI without
// MPI_THREAD_MULTIPLE, a TCP job whose ranks could not all bind or reach each other over UDP.
struct RollCall {
  std::function<void(int to, int64_t word)> send;                         // to < 0: every peer
  std::function<void(std::vector<std::pair<int, int64_t>>* notes)> poll;  // (sender, word)
};

class Watchdog {
 public:
  using AbortFn = std::function<void(const std::string& message)>;
  // warn_s <= 0 disables the watchdog; abort_s <= 0 means report only.
  void Start(int rank, int size, double warn_s, double abort_s, AbortFn abort, RollCall roll_call);
  void Stop();
  void Enter(const WatchSection& section);  // background thread
  void Leave();

  // The roll call's words: section seq * 2 + what the sender says of it.
  enum Note : int64_t { kBlocked = 0, kWorking = 1 };
  static int64_t Word(int64_t seq, Note note) { return seq * 2 + note; }

 private:
  void Run();
  void ReadNotes(int64_t now, std::unique_lock<std::mutex>* lk);
  void AnswerPeers(std::unique_lock<std::mutex>* lk);
  void Progressed(int64_t now);
  std::string Describe(int64_t blocked_us) const;

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool running_ = false, stop_ = false, active_ = false, announced_ = false;
  WatchSection section_;
  int64_t seq_ = -1;  // sections entered so far - 1: identical on every rank
  int64_t since_us_ = 0, last_report_us_ = 0;
  static constexpr int64_t kNever = INT64_MIN / 2;
  int64_t local_progress_us_ = kNever;  // when this rank last progressed by itself, this section
  uint64_t seen_progress_ = 0;          // WatchProgressCount() when last checked
  int rank_ = 0, size_ = 1;
  double warn_s_ = 0, abort_s_ = 0;
  AbortFn abort_;
  RollCall roll_call_;
  std::vector<int64_t> peers_blocked_in_;  // per rank: latest section it said it is blocked in
  std::vector<bool> asks_;                 // per rank: said so, not answered yet
};

// The process's watchdog (one engine per process).
Watchdog& GlobalWatchdog();

class WatchScope {
 public:
  explicit WatchScope(const WatchSection& s) { GlobalWatchdog().Enter(s); }
  ~WatchScope() { GlobalWatchdog().Leave(); }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;
};

}  // namespace hvd
