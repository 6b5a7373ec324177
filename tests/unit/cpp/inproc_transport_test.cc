// The in-process transport (transport/inproc): point-to-point semantics (ordering, tags, empty
// messages, eager and rendezvous sends, tests and naps), the topology it builds with
// ranks_per_host, communicator isolation, process sets (Subset), and two threads of one rank
// driving different Comms at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "inproc_harness.h"
#include "transport/inproc/inproc_transport.h"

namespace hvd {
namespace {

using inproc_test::RunRanks;

TEST(InprocComm, MessagesOfOnePeerAndTagArriveInPostingOrder) {
  for (size_t eager : {SIZE_MAX, size_t(0)}) {  // receives posted late (eager) or waited for
    RunRanks(2, 0, eager, [&](Transport& t) {
      Comm& c = t.comm();
      constexpr int kN = 20;
      std::vector<int> out(kN), in(kN, -1);
      std::vector<Transfer> tr;
      if (c.rank() == 0) {
        for (int i = 0; i < kN; ++i) {
          out[i] = i * 7;
          tr.push_back(c.Isend(&out[i], sizeof(int), 1, 5));
        }
      } else {
        // Half the receives before the sends could land, half after.
        for (int i = 0; i < kN / 2; ++i) tr.push_back(c.Irecv(&in[i], sizeof(int), 0, 5));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        for (int i = kN / 2; i < kN; ++i) tr.push_back(c.Irecv(&in[i], sizeof(int), 0, 5));
      }
      c.WaitAll(&tr);
      if (c.rank() == 1) {
        for (int i = 0; i < kN; ++i) EXPECT_EQ(in[i], i * 7) << "message " << i;
      }
    });
  }
}

TEST(InprocComm, TagsAndPeersMatchSeparately) {
  RunRanks(3, 0, [](Transport& t) {
    Comm& c = t.comm();
    if (c.rank() == 0) {
      // Receives in an order no sender follows: each must still get its own message.
      int a = 0, b = 0, d = 0;
      Transfer tr[3] = {c.Irecv(&a, sizeof a, 2, 9), c.Irecv(&b, sizeof b, 1, 9),
                        c.Irecv(&d, sizeof d, 1, 8)};
      c.WaitAll(3, tr);
      EXPECT_EQ(a, 29);
      EXPECT_EQ(b, 19);
      EXPECT_EQ(d, 18);
    } else {
      const int x8 = c.rank() * 10 + 8, x9 = c.rank() * 10 + 9;
      std::vector<Transfer> tr;
      if (c.rank() == 1) tr.push_back(c.Isend(&x8, sizeof x8, 0, 8));
      tr.push_back(c.Isend(&x9, sizeof x9, 0, 9));
      c.WaitAll(&tr);
    }
  });
}

TEST(InprocComm, EmptyMessagesMatchAndComplete) {
  RunRanks(2, 0, [](Transport& t) {
    Comm& c = t.comm();
    const int peer = 1 - c.rank();
    std::vector<Transfer> tr = {c.Irecv(nullptr, 0, peer, 1), c.Isend(nullptr, 0, peer, 1)};
    c.WaitAll(&tr);
    // An empty message between two full ones keeps its place.
    int x = c.rank() + 100, y = 0, z = 0;
    tr = {c.Irecv(&y, sizeof y, peer, 2), c.Irecv(nullptr, 0, peer, 2),
          c.Irecv(&z, sizeof z, peer, 2), c.Isend(&x, sizeof x, peer, 2),
          c.Isend(&x, 0, peer, 2),        c.Isend(&x, sizeof x, peer, 2)};
    c.WaitAll(&tr);
    EXPECT_EQ(y, peer + 100);
    EXPECT_EQ(z, peer + 100);
  });
}

// IrecvUpTo takes any message up to its capacity, 0 bytes included, and reports the length;
// whichever side comes first, and for eager and rendezvous sends.
TEST(InprocComm, ReceiveUpToReportsTheLength) {
  for (size_t eager : {SIZE_MAX, size_t(0)})
    RunRanks(2, 0, eager, [&](Transport& t) {
      Comm& c = t.comm();
      const size_t sizes[] = {0, 7, 64};
      std::vector<char> out(64, 'q'), in(3 * 64, 0);
      size_t got[3] = {99, 99, 99};
      std::vector<Transfer> tr;
      if (c.rank() == 0) {
        for (size_t n : sizes) tr.push_back(c.Isend(out.data(), n, 1, 4));
      } else {
        tr.push_back(c.IrecvUpTo(&in[0], 64, 0, 4, &got[0]));  // most likely before its send
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        for (int i = 1; i < 3; ++i) tr.push_back(c.IrecvUpTo(&in[i * 64], 64, 0, 4, &got[i]));
      }
      c.WaitAll(&tr);
      if (c.rank() == 1)
        for (int i = 0; i < 3; ++i) {
          EXPECT_EQ(got[i], sizes[i]) << "message " << i;
          EXPECT_EQ(std::string(&in[i * 64], sizes[i]), std::string(sizes[i], 'q'));
        }
    });
}

TEST(InprocComm, RendezvousSendsWaitForTheirReceive) {
  RunRanks(2, 0, /*eager_limit=*/16, [](Transport& t) {
    Comm& c = t.comm();
    std::vector<char> buf(1000, c.rank() == 0 ? 'a' : 0);
    if (c.rank() == 0) {
      Transfer s = c.Isend(buf.data(), buf.size(), 1, 3);
      // Rank 1 posts its receive only after it has seen this barrier message.
      EXPECT_FALSE(c.TestAll(1, &s));
      const char go = 1;
      Transfer g = c.Isend(&go, 1, 1, 4);  // below the limit: eager
      EXPECT_TRUE(c.TestAll(1, &g));
      c.WaitAll(1, &s);
      EXPECT_EQ(s.handle, nullptr);
    } else {
      char go = 0;
      Transfer g = c.Irecv(&go, 1, 0, 4);
      c.WaitAll(1, &g);
      Transfer r = c.Irecv(buf.data(), buf.size(), 0, 3);  // completes at once: the send waits
      EXPECT_TRUE(c.TestAll(1, &r));
      EXPECT_EQ(buf, std::vector<char>(1000, 'a'));
    }
  });
}

TEST(InprocComm, TestAnyReportsOneAtATimeThenIdle) {
  RunRanks(2, 0, [](Transport& t) {
    Comm& c = t.comm();
    int v[3] = {0, 0, 0};
    if (c.rank() == 0) {
      Transfer tr[4];  // tr[1] stays default
      tr[0] = c.Irecv(&v[0], sizeof(int), 1, 1);
      tr[2] = c.Irecv(&v[1], sizeof(int), 1, 2);
      tr[3] = c.Irecv(&v[2], sizeof(int), 1, 3);
      bool idle = true;
      EXPECT_EQ(c.TestAny(4, tr, &idle), -1);  // nothing sent yet: rank 1 waits for our go
      EXPECT_FALSE(idle);
      const int go = 1;
      Transfer g = c.Isend(&go, sizeof go, 1, 9);
      c.WaitAll(1, &g);
      std::vector<int> seen;
      for (int k = 0; k < 3; ++k) seen.push_back(c.WaitAny(4, tr));
      std::sort(seen.begin(), seen.end());
      EXPECT_EQ(seen, (std::vector<int>{0, 2, 3}));
      EXPECT_EQ(c.WaitAny(4, tr), -1);
      EXPECT_EQ(c.TestAny(4, tr, &idle), -1);
      EXPECT_TRUE(idle);
      EXPECT_EQ(v[0] + v[1] + v[2], 6);
    } else {
      int go = 0;
      Transfer g = c.Irecv(&go, sizeof go, 0, 9);
      c.WaitAll(1, &g);
      const int x[3] = {1, 2, 3};
      std::vector<Transfer> tr = {c.Isend(&x[2], sizeof(int), 0, 3),
                                  c.Isend(&x[0], sizeof(int), 0, 1),
                                  c.Isend(&x[1], sizeof(int), 0, 2)};
      c.WaitAll(&tr);
    }
  });
}

TEST(InprocComm, NapWakesWhenDataArrives) {
  RunRanks(2, 0, [](Transport& t) {
    Comm& c = t.comm();
    int x = 0;
    if (c.rank() == 1) {
      Transfer r = c.Irecv(&x, sizeof x, 0, 1);
      const auto start = std::chrono::steady_clock::now();
      while (!c.TestAll(1, &r)) c.Nap(2000000);  // 2 s naps: only the wake-up ends them early
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      EXPECT_LT(ms, 1000) << "the nap did not wake on arrival";
      EXPECT_EQ(x, 42);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      x = 42;
      Transfer s = c.Isend(&x, sizeof x, 1, 1);
      c.WaitAll(1, &s);
    }
  });
}

TEST(InprocComm, SmallCollectivesOverPointToPoint) {
  for (int n : {1, 2, 3, 5, 8})
    RunRanks(n, 0, [n](Transport& t) {
      Comm& c = t.comm();
      const int r = c.rank();
      std::vector<int64_t> all(n);
      const int64_t mine = 1000 + r;
      c.Allgather(&mine, sizeof mine, all.data());
      for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], 1000 + q);
      std::vector<int64_t> send(n), recv(n);
      for (int q = 0; q < n; ++q) send[q] = r * 100 + q;
      c.AlltoallInt64(send.data(), recv.data());
      for (int q = 0; q < n; ++q) EXPECT_EQ(recv[q], q * 100 + r);
      for (int root = 0; root < n; ++root) {
        // 1 MiB pieces: one size below a piece, one above.
        for (size_t bytes : {size_t(13), (size_t(1) << 20) + 5}) {
          std::vector<char> b(bytes, r == root ? char('A' + root) : 0);
          c.Bcast(b.data(), b.size(), root);
          EXPECT_EQ(b, std::vector<char>(bytes, char('A' + root))) << "root " << root;
        }
      }
    });
}

// Every (n, ranks_per_host): the fields of transport.h, and local()/cross() connect the ranks
// they claim to.
TEST(InprocTopology, RanksPerHostSplitsConsecutiveRanks) {
  for (int n = 1; n <= 8; ++n)
    for (int rph : {0, 1, 2, 3, 4}) {
      RunRanks(n, rph, [n, rph](Transport& t) {
        SCOPED_TRACE(::testing::Message() << n << " ranks, " << rph << " per host");
        const int r = t.rank, per = rph > 0 ? rph : n;
        const int hosts = (n + per - 1) / per;
        EXPECT_STREQ(t.Name(), "inproc");
        EXPECT_EQ(t.size, n);
        EXPECT_EQ(t.comm().rank(), r);
        EXPECT_EQ(t.comm().size(), n);
        EXPECT_TRUE(t.threads_multiple);
        EXPECT_TRUE(t.comm().ThreadsMultiple());
        EXPECT_EQ(t.num_hosts, hosts);
        EXPECT_EQ(t.local_rank, r % per);
        EXPECT_EQ(t.local_size, std::min(per, n - r / per * per));
        EXPECT_EQ(t.cross_rank, r / per);
        std::vector<int> host_sizes;  // the last host may be partial
        for (int h = 0; h < hosts; ++h) host_sizes.push_back(std::min(per, n - h * per));
        EXPECT_EQ(t.min_local_size, host_sizes.back());
        EXPECT_EQ(t.max_local_size, host_sizes.front());
        EXPECT_EQ(t.homogeneous, host_sizes.front() == host_sizes.back());
        EXPECT_EQ(t.ranks_on_machine, n);
        std::vector<int> cross;
        for (int q = 0; q < n; ++q) {
          EXPECT_EQ(t.host_of[q], q / per);
          EXPECT_EQ(t.local_rank_of[q], q % per);
          if (q % per == r % per) cross.push_back(q);
        }
        EXPECT_EQ(t.cross_members, cross);
        EXPECT_EQ(t.cross_size, static_cast<int>(cross.size()));
        // The Comms: gather every member's global rank.
        EXPECT_EQ(t.local().rank(), t.local_rank);
        EXPECT_EQ(t.local().size(), t.local_size);
        EXPECT_EQ(t.cross().rank(), t.cross_rank);
        EXPECT_EQ(t.cross().size(), t.cross_size);
        std::vector<int> local_got(t.local().size()), cross_got(t.cross().size());
        t.local().Allgather(&r, sizeof r, local_got.data());
        t.cross().Allgather(&r, sizeof r, cross_got.data());
        std::vector<int> local_want(t.local_size);
        std::iota(local_want.begin(), local_want.end(), r / per * per);
        EXPECT_EQ(local_got, local_want);
        EXPECT_EQ(cross_got, cross);
      });
    }
}

// The same tag on comm(), local() and cross() at once: each Comm's messages stay its own.
TEST(InprocComm, CommunicatorsDoNotShareMessages) {
  RunRanks(4, 2, [](Transport& t) {
    const int r = t.rank;
    // Ranks 0 and 1 are peers on comm() and local(); 0 and 2 on comm() and cross().
    std::vector<Comm*> comms = {&t.comm(), &t.local(), &t.cross()};
    std::vector<int> peers = {r ^ 1, t.local_rank ^ 1, t.cross_rank ^ 1};
    std::vector<int> expect = {r ^ 1, r ^ 1, r ^ 2};
    std::vector<int> got(3, -1), mine(3);
    std::vector<Transfer> tr;
    for (int i = 2; i >= 0; --i)  // receives in reverse, sends in order
      tr.push_back(comms[i]->Irecv(&got[i], sizeof(int), peers[i], 7));
    for (int i = 0; i < 3; ++i) {
      mine[i] = r;
      tr.push_back(comms[i]->Isend(&mine[i], sizeof(int), peers[i], 7));
    }
    t.comm().WaitAll(&tr);
    EXPECT_EQ(got, expect);
  });
}

// ThreadsMultiple: a second thread of each rank drives cross() while the first drives local()
// (the hierarchical allreduce's pipeline), many small messages each, rendezvous and eager.
TEST(InprocComm, TwoThreadsOfARankDriveTwoComms) {
  for (size_t eager : {SIZE_MAX, size_t(64)})
    RunRanks(6, 3, eager, [](Transport& t) {
      auto ring = [](Comm& c, int salt) {
        const int n = c.size(), right = (c.rank() + 1) % n, left = (c.rank() + n - 1) % n;
        std::vector<int> out(100), in(100);
        for (int round = 0; round < 50; ++round) {
          for (int i = 0; i < 100; ++i) out[i] = salt + c.rank() * 1000 + round * 7 + i;
          std::vector<Transfer> tr = {c.Irecv(in.data(), 400, left, 1),
                                      c.Isend(out.data(), 400, right, 1)};
          c.WaitAll(&tr);
          for (int i = 0; i < 100; ++i)
            ASSERT_EQ(in[i], salt + left * 1000 + round * 7 + i) << "round " << round;
        }
      };
      std::thread second([&] { ring(t.cross(), 500000); });
      ring(t.local(), 0);
      second.join();
    });
}

TEST(InprocSubset, MembersGetTheirOwnTransportOthersNull) {
  RunRanks(6, 2, [](Transport& t) {
    const std::vector<int> members = {1, 3, 4};
    std::unique_ptr<Transport> sub;
    ASSERT_TRUE(t.Subset(members, &sub).ok());
    const auto it = std::find(members.begin(), members.end(), t.rank);
    if (it == members.end()) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    const int sr = static_cast<int>(it - members.begin());
    EXPECT_EQ(sub->rank, sr);
    EXPECT_EQ(sub->size, 3);
    EXPECT_EQ(sub->world_ranks, members);
    EXPECT_EQ(sub->WorldRank(sr), t.rank);
    // Hosts by global rank / 2: 1 -> 0, 3 -> 1, 4 -> 2: three hosts of one rank.
    EXPECT_EQ(sub->num_hosts, 3);
    EXPECT_EQ(sub->local_size, 1);
    EXPECT_EQ(sub->cross_size, 3);
    EXPECT_EQ(sub->host_of, (std::vector<int>{0, 1, 2}));
    std::vector<int> got(3);
    sub->comm().Allgather(&t.rank, sizeof(int), got.data());
    EXPECT_EQ(got, members);
    // A set within the set, by the set's own ranks: {0, 2} of it are global ranks 1 and 4.
    std::unique_ptr<Transport> inner;
    ASSERT_TRUE(sub->Subset({0, 2}, &inner).ok());
    EXPECT_EQ(inner != nullptr, sr != 1);
    if (inner) {
      EXPECT_EQ(inner->world_ranks, (std::vector<int>{1, 4}));
      std::vector<int> g(2);
      inner->comm().Allgather(&t.rank, sizeof(int), g.data());
      EXPECT_EQ(g, (std::vector<int>{1, 4}));
    }
  });
}

TEST(InprocSubset, OverlappingSetsKeepTheirMessagesApart) {
  RunRanks(4, 0, [](Transport& t) {
    std::unique_ptr<Transport> a, b, all;
    ASSERT_TRUE(t.Subset({0, 1, 2}, &a).ok());
    ASSERT_TRUE(t.Subset({1, 2, 3}, &b).ok());
    ASSERT_TRUE(t.Subset({0, 1, 2, 3}, &all).ok());
    ASSERT_NE(all, nullptr);
    // One round of every set at once, same tags everywhere; sets gather different values.
    std::vector<int> ga(3), gb(3), gall(4);
    const int va = 100 + t.rank, vb = 200 + t.rank;
    if (b) b->comm().Allgather(&vb, sizeof(int), gb.data());
    if (a) a->comm().Allgather(&va, sizeof(int), ga.data());
    all->comm().Allgather(&t.rank, sizeof(int), gall.data());
    if (a) { EXPECT_EQ(ga, (std::vector<int>{100, 101, 102})); }
    if (b) { EXPECT_EQ(gb, (std::vector<int>{201, 202, 203})); }
    EXPECT_EQ(gall, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(all->world_ranks, (std::vector<int>{0, 1, 2, 3}));
  });
}

TEST(InprocSubset, RejectsRanksThatAreNotAscendingMembers) {
  RunRanks(3, 0, [](Transport& t) {
    std::unique_ptr<Transport> s;
    EXPECT_EQ(t.Subset({2, 1}, &s).code(), Status::INVALID_ARGUMENT);
    EXPECT_EQ(t.Subset({0, 3}, &s).code(), Status::INVALID_ARGUMENT);
    EXPECT_EQ(t.Subset({1, 1}, &s).code(), Status::INVALID_ARGUMENT);
    EXPECT_EQ(s, nullptr);
  });
}

}  // namespace
}  // namespace hvd
