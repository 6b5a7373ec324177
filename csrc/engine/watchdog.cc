#include "engine/watchdog.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "common/common.h"
#include "common/logging.h"

namespace hvd {

Watchdog& GlobalWatchdog() {
  static Watchdog w;
  return w;
}

void Watchdog::Start(int rank, int size, double warn_s, double abort_s, AbortFn abort,
                     RollCall roll_call) {
  std::lock_guard<std::mutex> lk(mu_);
  if (running_ || warn_s <= 0) return;
  rank_ = rank;
  size_ = size;
  warn_s_ = warn_s;
  abort_s_ = abort_s;
  abort_ = std::move(abort);
  roll_call_ = std::move(roll_call);
  peers_blocked_in_.assign(size, -1);
  asks_.assign(size, false);
  // A re-formed world (TCP, elastic) starts counting sections anew on every rank, survivors too.
  seq_ = -1;
  active_ = announced_ = false;
  local_progress_us_ = kNever;
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
  ++seq_;
  since_us_ = NowMicros();
  last_report_us_ = since_us_;
  seen_progress_ = WatchProgressCount().load(std::memory_order_relaxed);
  local_progress_us_ = kNever;  // only work done in this section earns answers
  active_ = true;
  announced_ = false;
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
  os << " has been blocked for " << std::fixed << std::setprecision(1) << blocked_us / 1e6
     << " s with no progress, waiting for ";
  // Roll call: peers that said they are blocked in this very section are here too.
  std::vector<int> absent, present;
  if (roll_call_.poll) {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) (peers_blocked_in_[r] == seq_ ? present : absent).push_back(r);
  }
  const char* culprit = "one of them";
  if (!absent.empty()) {
    // Silent: not blocked here by its own account, so it never arrived or cannot even say so.
    os << Ranks(absent) << " (silent: not blocked in this section by "
       << (absent.size() > 1 ? "their" : "its") << " own account";
    if (!present.empty())
      os << "; " << Ranks(present) << (present.size() > 1 ? " are" : " is") << " blocked in it too";
    os << ")";
    culprit = absent.size() > 1 ? "those processes" : "that process";
  } else if (section_.recv_from >= 0) {
    if (section_.recv_from == section_.send_to) {
      os << "rank " << section_.recv_from;
      culprit = "that process";
    } else {
      os << "rank " << section_.recv_from << " (receiving from it) or rank " << section_.send_to
         << " (sending to it)";
    }
  } else {
    os << "every rank";
  }
  os << "; " << culprit << " may be stopped, dead, or stuck outside Horovod";
  return os.str();
}

void Watchdog::Progressed(int64_t now) {
  since_us_ = last_report_us_ = now;
  announced_ = false;  // blocked again later: say so again
}

// Both called with the lock held; they release it around the transport's calls (the background
// thread must never wait on them).
void Watchdog::ReadNotes(int64_t now, std::unique_lock<std::mutex>* lk) {
  std::vector<std::pair<int, int64_t>> notes;
  lk->unlock();
  roll_call_.poll(&notes);
  lk->lock();
  for (const auto& note : notes) {
    const int from = note.first;
    const int64_t seq = note.second >> 1;
    if ((note.second & 1) == kBlocked) {
      // Maybe for a section this rank has yet to enter: answered once it works in it.
      peers_blocked_in_[from] = std::max(peers_blocked_in_[from], seq);
      asks_[from] = true;
    } else if (active_ && seq == seq_) {
      Progressed(now);  // a peer works in this section: the job is not blocked here
    }
  }
}

void Watchdog::AnswerPeers(std::unique_lock<std::mutex>* lk) {
  std::vector<int> to;
  for (int r = 0; r < size_; ++r) {
    if (!asks_[r] || peers_blocked_in_[r] > seq_) continue;  // not there yet
    asks_[r] = false;                                        // stale, or answered now
    if (peers_blocked_in_[r] == seq_) to.push_back(r);
  }
  if (to.empty()) return;
  const int64_t word = Word(seq_, kWorking);
  lk->unlock();
  for (int r : to) roll_call_.send(r, word);
  lk->lock();
}

void Watchdog::Run() {
  const int64_t warn_us = static_cast<int64_t>(warn_s_ * 1e6);
  const int64_t abort_us = static_cast<int64_t>(abort_s_ * 1e6);
  // Announce well before reporting, so that every live peer's announcement has arrived when
  // this rank names the absent ones; a tick of 100 ms keeps that margin for a 1 s check time.
  const int64_t announce_us = warn_us / 4;
  constexpr int64_t kTickUs = 100000;
  // "Working lately": progress of its own in this section within the last two ticks at least,
  // so that a rank busy with local work answers whenever a peer asks.
  const int64_t busy_window_us = std::max(announce_us, 2 * kTickUs);
  std::unique_lock<std::mutex> lk(mu_);
  int64_t last_tick = NowMicros();
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::microseconds(kTickUs), [this] { return stop_; });
    const int64_t now = NowMicros();
    // A tick far later than asked means this process itself was stopped (SIGSTOP, a debugger,
    // a frozen VM): the time it lost says nothing about its peers, so measuring restarts.
    if (now - last_tick > 10 * kTickUs) since_us_ = last_report_us_ = now;
    last_tick = now;
    if (stop_) break;
    if (active_) {
      const uint64_t progress = WatchProgressCount().load(std::memory_order_relaxed);
      if (progress != seen_progress_) {  // data moved or local work done: not blocked
        seen_progress_ = progress;
        local_progress_us_ = now;
        Progressed(now);
      }
    }
    // Read at every tick, active or not, so that notes never pile up (MPI's queues, a socket's
    // buffer).
    if (roll_call_.poll) {
      ReadNotes(now, &lk);
      if (active_ && now - local_progress_us_ < busy_window_us) AnswerPeers(&lk);
    }
    if (stop_ || !active_) continue;
    const int64_t blocked = now - since_us_;
    if (blocked < announce_us) continue;
    if (roll_call_.send && !announced_) {
      announced_ = true;
      const int64_t seq = seq_;
      lk.unlock();
      roll_call_.send(-1, Word(seq, kBlocked));
      lk.lock();
      if (stop_ || !active_ || seq != seq_) continue;  // the section ended meanwhile
    }
    if (abort_us > 0 && blocked >= abort_us) {
      std::ostringstream os;
      os << Describe(blocked)
         << ". Aborting the job (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" << abort_s_
         << "): a blocked transfer cannot be cancelled.";
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
