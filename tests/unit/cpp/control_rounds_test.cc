// The controller's control rounds as transport.cc implements them over any transport's
// point-to-point (BitAndAllreduce, BitOrAllreduce, ExchangeRound, GatherToRoot,
// BroadcastFromRoot, AllgatherStrings, BarrierWithin, GatherRecordsToRoot), run on the
// in-process transport at 1 to 8 ranks and on a process set, against results computed directly.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "inproc_harness.h"

namespace hvd {
namespace {

using inproc_test::RunRanks;

const int kSizes[] = {1, 2, 3, 4, 5, 7, 8};

uint64_t Word(int rank, int w, int round) {
  return inproc_test::Mix(static_cast<uint64_t>(rank * 131 + w * 17 + round));
}

TEST(ControlRounds, BitAndAndBitOrCombineEveryRanksWords) {
  for (int n : kSizes)
    RunRanks(n, 0, [n](Transport& t) {
      for (int round = 0; round < 4; ++round) {  // rounds follow each other on one tag
        const int words = 1 + round;
        std::vector<uint64_t> want_and(words, ~0ull), want_or(words, 0);
        for (int q = 0; q < n; ++q)
          for (int w = 0; w < words; ++w) {
            want_and[w] &= Word(q, w, round);
            want_or[w] |= Word(q, w, round);
          }
        std::vector<uint64_t> a(words), o(words);
        for (int w = 0; w < words; ++w) a[w] = o[w] = Word(t.rank, w, round);
        t.BitAndAllreduce(&a, /*has_work=*/round % 2 == 0);
        t.BitOrAllreduce(&o);
        EXPECT_EQ(a, want_and) << n << " ranks, round " << round;
        EXPECT_EQ(o, want_or) << n << " ranks, round " << round;
      }
    });
}

std::string RoundMessage(int rank, int round) {
  // Lengths 0 to 39: rank 0's first message is empty.
  return std::string((rank * 5 + round * 3) % 40, static_cast<char>('a' + (rank + round) % 26));
}

TEST(ControlRounds, ExchangeRoundDeliversEveryPeersMessage) {
  for (int n : kSizes)
    RunRanks(n, 0, [n](Transport& t) {
      constexpr size_t kCapacity = 40;
      std::vector<std::vector<char>> all;
      std::vector<size_t> lens;
      for (int round = 0; round < 3; ++round) {
        const std::string m = RoundMessage(t.rank, round);
        if (round == 0) all.assign(n, std::vector<char>(1, 'z'));  // this rank's entry stays
        t.ExchangeRound(std::vector<char>(m.begin(), m.end()), kCapacity, &all, &lens, round == 1);
        ASSERT_EQ(all.size(), static_cast<size_t>(n));
        ASSERT_EQ(lens.size(), static_cast<size_t>(n));
        for (int q = 0; q < n; ++q) {
          if (q == t.rank) {
            EXPECT_EQ(all[q], std::vector<char>(1, 'z'));
            continue;
          }
          const std::string want = RoundMessage(q, round);
          EXPECT_EQ(lens[q], want.size()) << "from " << q << ", round " << round;
          EXPECT_EQ(std::string(all[q].data(), lens[q]), want) << "from " << q;
        }
      }
    });
}

TEST(ControlRounds, GatherBroadcastAndAllgatherStrings) {
  for (int n : kSizes)
    RunRanks(n, 0, [n](Transport& t) {
      auto blob = [](int r) { return std::string(r * 3 % 7, static_cast<char>('0' + r)); };
      const std::vector<std::string> gathered = t.GatherToRoot(blob(t.rank));
      if (t.rank == 0) {
        ASSERT_EQ(gathered.size(), static_cast<size_t>(n));
        for (int q = 0; q < n; ++q) EXPECT_EQ(gathered[q], blob(q));
      } else {
        EXPECT_TRUE(gathered.empty());
      }
      for (const std::string& root_blob : {std::string("the root's word"), std::string()}) {
        std::string b = t.rank == 0 ? root_blob : std::string(t.rank * 20, 'x');
        t.BroadcastFromRoot(&b);
        EXPECT_EQ(b, root_blob);
      }
      const std::vector<std::string> all = t.AllgatherStrings(blob(t.rank + 1));
      ASSERT_EQ(all.size(), static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], blob(q + 1));
    });
}

TEST(ControlRounds, RoundsOnAProcessSet) {
  RunRanks(5, 0, [](Transport& t) {
    std::unique_ptr<Transport> set;
    ASSERT_TRUE(t.Subset({0, 2, 3}, &set).ok());
    if (!set) return;
    std::vector<uint64_t> bits = {1ull << t.rank};
    set->BitOrAllreduce(&bits);
    EXPECT_EQ(bits[0], (1ull << 0) | (1ull << 2) | (1ull << 3));
    const auto all = set->AllgatherStrings(std::to_string(t.rank));
    EXPECT_EQ(all, (std::vector<std::string>{"0", "2", "3"}));
    EXPECT_EQ(set->BarrierWithin(10000000), "");
  });
}

// BarrierWithin keeps its flags in a function-static vector that every rank of a process
// resizes: harmless between processes, a data race between threads when the vector grows.
// Grown once here to the largest size, later calls only overwrite it. The growing call is also
// the timeout case of rank 0: nobody else arrives.
void GrowBarrierFlags() {
  static bool grown = false;
  if (grown) return;
  grown = true;
  RunRanks(8, 0, [](Transport& t) {
    if (t.rank == 0) { EXPECT_NE(t.BarrierWithin(1000), ""); }
  });
}

TEST(ControlRounds, BarrierWithinReturnsOnceEveryRankArrives) {
  GrowBarrierFlags();
  for (int n : kSizes)
    RunRanks(n, 0, [](Transport& t) {
      for (int i = 0; i < 3; ++i) EXPECT_EQ(t.BarrierWithin(10000000), "") << "barrier " << i;
    });
}

TEST(ControlRounds, BarrierWithinTimesOutWhenARankStaysAway) {
  GrowBarrierFlags();
  RunRanks(3, 0, [](Transport& t) {
    if (t.rank == 2) return;  // never arrives
    const std::string why = t.BarrierWithin(50000);
    EXPECT_NE(why.find("barrier"), std::string::npos) << why;
  });
}

// GatherRecordsToRoot keeps its buffers in function-static vectors that each rank fills: ranks
// as threads must take turns (rank 1 to n-1, rank 0 last), or one rank's record is sent from
// another's copy. Each send completes at once here (eager), so the turns cannot deadlock.
void InTurn(std::atomic<int>* turn, int rank, int n, const std::function<void()>& f) {
  const int pos = rank == 0 ? n - 1 : rank - 1;
  while (turn->load() != pos) std::this_thread::yield();
  f();
  turn->fetch_add(1);
}

struct Record {
  int64_t rank;
  double value;
  char tag[8];
};

TEST(ControlRounds, GatherRecordsToRootCollectsEveryRecord) {
  for (int n : kSizes) {
    std::atomic<int> turn{0};
    RunRanks(n, 0, [n, &turn](Transport& t) {
      Record mine{t.rank, t.rank * 1.5, {'r', char('0' + t.rank)}};
      std::vector<char> all;
      std::string why;
      InTurn(&turn, t.rank, n,
             [&] { why = t.GatherRecordsToRoot(&mine, sizeof mine, 10000000, &all); });
      EXPECT_EQ(why, "");
      if (t.rank != 0) {
        EXPECT_TRUE(all.empty());
        return;
      }
      ASSERT_EQ(all.size(), n * sizeof(Record));
      for (int q = 0; q < n; ++q) {
        Record r;
        std::memcpy(&r, all.data() + q * sizeof(Record), sizeof r);
        EXPECT_EQ(r.rank, q);
        EXPECT_EQ(r.value, q * 1.5);
        EXPECT_EQ(r.tag[1], char('0' + q));
      }
    });
  }
}

TEST(ControlRounds, GatherRecordsToRootGivesUpOnASilentRank) {
  std::atomic<int> turn{0};
  RunRanks(3, 0, [&turn](Transport& t) {
    if (t.rank == 2) return;  // never sends
    const int64_t mine = t.rank;
    std::vector<char> all;
    std::string why;
    // Turns among the two that call: rank 1, then rank 0.
    InTurn(&turn, t.rank, 2, [&] { why = t.GatherRecordsToRoot(&mine, sizeof mine, 50000, &all); });
    if (t.rank == 0) {
      EXPECT_NE(why.find("not every rank answered"), std::string::npos) << why;
      EXPECT_TRUE(all.empty());
    } else {
      EXPECT_EQ(why, "");
    }
  });
}

}  // namespace
}  // namespace hvd
