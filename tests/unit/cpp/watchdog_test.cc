// The watchdog's roll call (engine/watchdog.h) over an in-memory transport: a peer's local work
// is progress (issue 17, item 10). One Watchdog plays one rank; the test plays its peer. Bounds
// are generous (100 ms ticks): each check waits for an event, with a deadline, or checks that
// something did not happen over a span several times the watchdog's own latency.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/watchdog.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;

// Notes to and from the watched rank; the peer is rank 0 or 1, whichever it is not.
struct Wire {
  std::mutex mu;
  std::vector<std::pair<int, int64_t>> inbox, sent;  // (from, word), (to, word)
  std::atomic<bool> aborted{false};
  std::string abort_message;

  RollCall Transport() {
    RollCall rc;
    rc.send = [this](int to, int64_t word) {
      std::lock_guard<std::mutex> lk(mu);
      sent.emplace_back(to, word);
    };
    rc.poll = [this](std::vector<std::pair<int, int64_t>>* notes) {
      std::lock_guard<std::mutex> lk(mu);
      notes->insert(notes->end(), inbox.begin(), inbox.end());
      inbox.clear();
    };
    return rc;
  }
  Watchdog::AbortFn Abort() {
    return [this](const std::string& msg) {
      std::lock_guard<std::mutex> lk(mu);
      abort_message = msg;
      aborted = true;
    };
  }
  void Deliver(int from, int64_t word) {
    std::lock_guard<std::mutex> lk(mu);
    inbox.emplace_back(from, word);
  }
  // Removes and counts the sent notes equal to (to, word).
  int Take(int to, int64_t word) {
    std::lock_guard<std::mutex> lk(mu);
    int n = 0;
    for (auto it = sent.begin(); it != sent.end();)
      if (it->first == to && it->second == word) {
        it = sent.erase(it);
        ++n;
      } else {
        ++it;
      }
    return n;
  }
};

WatchSection Section() {
  WatchSection s;
  s.what = "RING_ALLGATHER";
  return s;
}

// Check time 0.4 s (announce after 0.1 s), shutdown 1.2 s.
constexpr double kWarnS = 0.4, kAbortS = 1.2;

TEST(Watchdog, BlockedRankIsKeptAliveByAWorkingPeer) {
  Wire wire;
  Watchdog w;
  w.Start(/*rank=*/1, /*size=*/2, kWarnS, kAbortS, wire.Abort(), wire.Transport());
  w.Enter(Section());  // section 0, in which rank 1 never progresses by itself
  // The peer answers every "blocked in 0" with "working in 0", for three shutdown times.
  int answered = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(3600);
  while (Clock::now() < until && !wire.aborted) {
    for (int n = wire.Take(-1, Watchdog::Word(0, Watchdog::kBlocked)); n > 0; --n, ++answered)
      wire.Deliver(0, Watchdog::Word(0, Watchdog::kWorking));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(wire.aborted) << wire.abort_message;
  EXPECT_GE(answered, 3) << "it asks again after each answer";
  // The peer stops answering (stuck): the shutdown follows, naming it.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!wire.aborted && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  w.Leave();
  w.Stop();
  ASSERT_TRUE(wire.aborted);
  EXPECT_NE(wire.abort_message.find("waiting for rank 0"), std::string::npos) << wire.abort_message;
}

TEST(Watchdog, RankWithLocalProgressAnswersABlockedPeer) {
  Wire wire;
  Watchdog w;
  w.Start(/*rank=*/0, /*size=*/2, kWarnS, kAbortS, wire.Abort(), wire.Transport());
  wire.Deliver(1, Watchdog::Word(0, Watchdog::kBlocked));  // may come before rank 0 arrives
  w.Enter(Section());
  int answers = 0;
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < until && answers == 0) {
    WatchProgress();  // rank 0 works: a copy's pieces
    answers = wire.Take(1, Watchdog::Word(0, Watchdog::kWorking));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  w.Leave();
  w.Stop();
  EXPECT_EQ(answers, 1);
  EXPECT_FALSE(wire.aborted) << wire.abort_message;
}

TEST(Watchdog, BlockedRanksDoNotKeepEachOtherAlive) {
  // Rank 0 makes no progress of its own: it never answers, whatever it hears, so a rank blocked
  // on it is not kept alive, and it aborts in time itself.
  Wire wire;
  Watchdog w;
  w.Start(/*rank=*/0, /*size=*/2, kWarnS, kAbortS, wire.Abort(), wire.Transport());
  w.Enter(Section());
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!wire.aborted && Clock::now() < deadline) {
    wire.Deliver(1, Watchdog::Word(0, Watchdog::kBlocked));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  w.Leave();
  w.Stop();
  EXPECT_TRUE(wire.aborted);
  EXPECT_EQ(wire.Take(1, Watchdog::Word(0, Watchdog::kWorking)), 0);
  EXPECT_GE(wire.Take(-1, Watchdog::Word(0, Watchdog::kBlocked)), 1) << "it said it is blocked";
}

TEST(Watchdog, RestartedWatchdogCountsSectionsAfresh) {
  // A world re-formed in process (TCP, elastic): survivors and new processes must name the same
  // sections, so a restarted watchdog counts from 0 again, whatever the last world reached.
  Wire wire;
  Watchdog w;
  w.Start(/*rank=*/0, /*size=*/2, kWarnS, kAbortS, wire.Abort(), wire.Transport());
  for (int i = 0; i < 3; ++i) {
    w.Enter(Section());
    w.Leave();
  }
  w.Stop();
  w.Start(/*rank=*/1, /*size=*/3, kWarnS, kAbortS, wire.Abort(), wire.Transport());
  w.Enter(Section());  // blocked here: it says so for section 0, not 3
  int said = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (said == 0 && Clock::now() < deadline) {
    said = wire.Take(-1, Watchdog::Word(0, Watchdog::kBlocked));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  w.Leave();
  w.Stop();
  EXPECT_GE(said, 1);
  EXPECT_EQ(wire.Take(-1, Watchdog::Word(3, Watchdog::kBlocked)), 0);
}

}  // namespace
}  // namespace hvd
