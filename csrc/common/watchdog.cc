#include "common/watchdog.h"

#include <sstream>

#include "common/common.h"
#include "common/logging.h"

namespace hvd {

Watchdog& GlobalWatchdog() {
  static Watchdog w;
  return w;
}

void Watchdog::Start(int rank, double warn_s, double abort_s, AbortFn abort) {
  std::lock_guard<std::mutex> lk(mu_);
  if (running_ || warn_s <= 0) return;
  rank_ = rank;
  warn_s_ = warn_s;
  abort_s_ = abort_s;
  abort_ = std::move(abort);
  stop_ = false;
  running_ = true;
  thread_ = std::thread(&Watchdog::Run, this);
}

void Watchdog::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!running_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lk(mu_);
  running_ = false;
}

void Watchdog::Enter(const WatchSection& section) {
  std::lock_guard<std::mutex> lk(mu_);
  section_ = section;
  since_us_ = NowMicros();
  last_report_us_ = since_us_;
  active_ = true;
}

void Watchdog::Leave() {
  std::lock_guard<std::mutex> lk(mu_);
  active_ = false;
}

std::string Watchdog::Describe(int64_t blocked_us) const {
  std::ostringstream os;
  os << "rank " << rank_ << ": " << section_.what;
  if (section_.tensor) {
    os << " of tensor '" << *section_.tensor << "'";
    if (section_.more_tensors) os << " (and " << section_.more_tensors << " fused with it)";
  }
  os << " has been blocked for " << blocked_us / 1000000 << " s waiting for ";
  const char* culprit = "one of them";
  if (section_.recv_from < 0) {
    os << "every rank";
  } else if (section_.recv_from == section_.send_to) {
    os << "rank " << section_.recv_from;
    culprit = "that process";
  } else {
    os << "rank " << section_.recv_from << " (receiving from it) or rank " << section_.send_to
       << " (sending to it)";
  }
  os << "; " << culprit << " may be stopped, dead, or stuck outside Horovod";
  return os.str();
}

void Watchdog::Run() {
  const int64_t warn_us = static_cast<int64_t>(warn_s_ * 1e6);
  const int64_t abort_us = static_cast<int64_t>(abort_s_ * 1e6);
  constexpr int64_t kTickUs = 500000;
  std::unique_lock<std::mutex> lk(mu_);
  int64_t last_tick = NowMicros();
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::microseconds(kTickUs), [this] { return stop_; });
    const int64_t now = NowMicros();
    // A tick far later than asked means this process itself was stopped (SIGSTOP, a debugger,
    // a frozen VM): the time it lost says nothing about its peers, so measuring restarts.
    if (now - last_tick > 4 * kTickUs) since_us_ = last_report_us_ = now;
    last_tick = now;
    if (stop_ || !active_) continue;
    const int64_t blocked = now - since_us_;
    if (abort_us > 0 && blocked >= abort_us) {
      std::ostringstream os;
      os << Describe(blocked) << ". Aborting the job (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="
         << abort_s_ << "): a blocked transfer cannot be cancelled.";
      std::string msg = os.str();
      lk.unlock();
      abort_(msg);  // does not return
      return;
    }
    if (blocked >= warn_us && now - last_report_us_ >= warn_us) {
      last_report_us_ = now;
      HVD_LOG(WARNING, Describe(blocked) << " (reported every HOROVOD_STALL_CHECK_TIME_SECONDS="
                                         << warn_s_ << " s)");
    }
  }
}

}  // namespace hvd
