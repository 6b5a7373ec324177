// Bounds the background thread's blocking sections: negotiation rounds and collectives, which
// wait inside MPI where no timeout can be set. A section running longer than the stall check
// time is reported with what it waits for (the op, the tensor, the ranks it exchanges with),
// again every period; with a shutdown time set, a section running that long ends the job: a
// blocked MPI transfer cannot be unwound, so failing the ops and carrying on is not possible.
// A thread of its own looks twice a second; entering a section costs the background thread one
// uncontended lock and a few stores, and text is built only when something is reported.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace hvd {

struct WatchSection {
  const char* what = "";                // e.g. "RING_ALLREDUCE", "negotiation round"
  const std::string* tensor = nullptr;  // first tensor of the op, if any (outlives the section)
  int more_tensors = 0;                 // fused with it
  int recv_from = -1, send_to = -1;     // ring neighbours; -1: every rank
};

class Watchdog {
 public:
  using AbortFn = std::function<void(const std::string& message)>;
  // warn_s <= 0 disables the watchdog; abort_s <= 0 means report only.
  void Start(int rank, double warn_s, double abort_s, AbortFn abort);
  void Stop();
  void Enter(const WatchSection& section);  // background thread
  void Leave();

 private:
  void Run();
  std::string Describe(int64_t blocked_us) const;

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool running_ = false, stop_ = false, active_ = false;
  WatchSection section_;
  int64_t since_us_ = 0, last_report_us_ = 0;
  int rank_ = 0;
  double warn_s_ = 0, abort_s_ = 0;
  AbortFn abort_;
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
