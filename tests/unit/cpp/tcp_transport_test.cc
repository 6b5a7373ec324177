// The TCP transport's data path (csrc/transport/tcp/): ranks are threads of this process
// (tcp_harness.h). Sizes 0 B to 8 MiB, out-of-order posting, receives of up to a size, the control
// rounds, Bcast, topology, SubComm and Subset, Unix-socket links between ranks of one machine,
// messages held in the kernel until their receive, and misuse. The rendezvous, the handshake and
// their failures are in tcp_setup_test.cc.
#include "tcp_harness.h"

namespace hvd {
namespace {

using namespace tcp_test;

// Point-to-point with every peer: sends first (so messages arrive before their receives are
// posted: buffered, or single-copy descriptors whose sends complete only once their receive
// takes them), receives in reverse order; then receives first, then sends.
void PointToPoint(Comm& c) {
  const size_t sizes[] = {0, 4096, 8 << 20};
  std::vector<std::vector<char>> out, in;
  std::vector<Transfer> t;
  for (int q = 0; q < c.size(); ++q) {
    if (q == c.rank()) continue;
    for (int i = 0; i < 3; ++i) {
      out.push_back(Pattern(sizes[i], c.rank(), q, i));
      t.push_back(c.Isend(out.back().data(), sizes[i], q, 10 + i));
    }
  }
  for (int i = 0; i < 20; ++i) {  // the messages arrive; the receives are not posted yet
    c.TestAll(static_cast<int>(t.size()), t.data());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  in.reserve(3 * c.size());
  for (int q = 0; q < c.size(); ++q) {
    if (q == c.rank()) continue;
    for (int i = 2; i >= 0; --i) {
      in.emplace_back(sizes[i] + 5, 'x');  // larger than the message: fine
      t.push_back(c.Irecv(in.back().data(), sizes[i], q, 10 + i));
    }
  }
  c.WaitAll(&t);
  size_t k = 0;
  for (int q = 0; q < c.size(); ++q) {
    if (q == c.rank()) continue;
    for (int i = 2; i >= 0; --i, ++k) {
      std::vector<char> want = Pattern(sizes[i], q, c.rank(), i);
      if (sizes[i] == 0) continue;
      ASSERT_EQ(0, std::memcmp(in[k].data(), want.data(), sizes[i])) << "from " << q << " " << i;
    }
  }
  // Receives first; two messages of one tag match in order.
  std::vector<std::vector<char>> in2(2 * c.size(), std::vector<char>(1 << 20));
  std::vector<std::vector<char>> out2;
  for (int q = 0; q < c.size(); ++q) {
    if (q == c.rank()) continue;
    t.push_back(c.Irecv(in2[2 * q].data(), 1 << 20, q, 7));
    t.push_back(c.Irecv(in2[2 * q + 1].data(), 100, q, 7));
  }
  out2.reserve(2 * c.size());
  for (int q = 0; q < c.size(); ++q) {
    if (q == c.rank()) continue;
    out2.push_back(Pattern(1 << 20, c.rank(), q, 1));
    t.push_back(c.Isend(out2.back().data(), 1 << 20, q, 7));
    out2.push_back(Pattern(100, c.rank(), q, 2));
    t.push_back(c.Isend(out2.back().data(), 100, q, 7));
  }
  c.WaitAll(&t);
  for (int q = 0; q < c.size(); ++q) {
    if (q == c.rank()) continue;
    EXPECT_EQ(in2[2 * q], Pattern(1 << 20, q, c.rank(), 1));
    EXPECT_EQ(0, std::memcmp(in2[2 * q + 1].data(), Pattern(100, q, c.rank(), 2).data(), 100));
  }
  // IrecvUpTo, itself included: 0, 10 and 100000 bytes into 200000, sent before the receives
  // (buffered) and after them; lengths reported.
  const size_t up[] = {0, 10, 100000};
  std::vector<size_t> got(6 * c.size(), 7);
  std::vector<std::vector<char>> in3(6 * c.size(), std::vector<char>(200000));
  std::vector<std::vector<char>> out3;
  out3.reserve(3 * c.size());
  for (int q = 0; q < c.size(); ++q)
    for (int i = 0; i < 3; ++i) {
      out3.push_back(Pattern(up[i], c.rank(), q, 3 + i));
      t.push_back(c.Isend(out3.back().data(), up[i], q, 30));
    }
  for (int q = 0; q < c.size(); ++q)
    for (int i = 0; i < 6; ++i)
      t.push_back(c.IrecvUpTo(in3[6 * q + i].data(), 200000, q, 30 + i / 3, &got[6 * q + i]));
  for (int q = 0; q < c.size(); ++q)
    for (int i = 0; i < 3; ++i) t.push_back(c.Isend(out3[3 * q + i].data(), up[i], q, 31));
  c.WaitAll(&t);
  for (int q = 0; q < c.size(); ++q)
    for (int i = 0; i < 6; ++i) {
      ASSERT_EQ(got[6 * q + i], up[i % 3]) << "from " << q << ", message " << i;
      EXPECT_EQ(0, std::memcmp(in3[6 * q + i].data(),
                               Pattern(up[i % 3], q, c.rank(), 3 + i % 3).data(), up[i % 3]));
    }
}

class TcpSizes : public ::testing::TestWithParam<int> {};

TEST_P(TcpSizes, MessagesRoundsBcastSubsets) {
  const int n = GetParam();
  const int fds = CountEntries("/proc/self/fd"), tasks = CountEntries("/proc/self/task");
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  // Links between ranks of one machine move to Unix sockets unless a rank keeps TCP: all move at
  // 2 ranks; at 3 rank 1 keeps TCP (links 0-1 and 1-2 stay TCP, 0-2 moves); at 4 none move.
  // Every moved link sends large messages as single-copy descriptors (threads of one process
  // may read its memory).
  auto keeps_tcp = [n](int r) { return n == 4 || (n == 3 && r == 1); };
  for (int r = 0; r < n; ++r) {
    opts.push_back(Opts(r, n, port));
    opts.back().local_unix_sockets = !keeps_tcp(r);
  }
  ExpectAllOk(RunRanks(opts, [n, keeps_tcp](int rank, Transport& t) {
    int moved = 0;
    for (int q = 0; q < n; ++q) moved += q != rank && !keeps_tcp(q) && !keeps_tcp(rank);
    EXPECT_EQ(static_cast<TcpTransport&>(t).unix_links(), moved);
    EXPECT_EQ(static_cast<TcpTransport&>(t).single_copy_links(), moved);
    EXPECT_STREQ(t.Name(), "tcp");
    EXPECT_EQ(t.rank, rank);
    EXPECT_EQ(t.size, n);
    EXPECT_EQ(t.local_size, 1);  // every rank has its own host name
    EXPECT_EQ(t.cross_size, n);
    EXPECT_FALSE(t.comm().ThreadsMultiple());
    PointToPoint(t.comm());
    Rounds(rank, t);
    if (n < 3) return;
    std::unique_ptr<Transport> sub;
    ASSERT_TRUE(t.Subset({0, 2}, &sub).ok());
    if (rank != 0 && rank != 2) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size, 2);
    EXPECT_EQ(sub->rank, rank / 2);
    EXPECT_EQ(sub->WorldRank(1), 2);
    PointToPoint(sub->comm());
    Rounds(sub->rank, *sub);
    sub->Finalize();
  }));
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds) << "a socket was left open";
  EXPECT_EQ(CountEntries("/proc/self/task"), tasks) << "a thread was left running";
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpSizes, ::testing::Values(2, 3, 4));

TEST(Tcp, TopologyWithRanksPerHost) {
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  for (int r = 0; r < 4; ++r) {
    opts.push_back(Opts(r, 4, port));
    opts.back().ranks_per_host = 2;
  }
  ExpectAllOk(RunRanks(opts, [](int rank, Transport& t) {
    EXPECT_EQ(t.local_size, 2);
    EXPECT_EQ(t.local_rank, rank % 2);
    EXPECT_EQ(t.cross_size, 2);
    EXPECT_EQ(t.cross_rank, rank / 2);
    EXPECT_EQ(t.num_hosts, 2);
    EXPECT_EQ(t.local().size(), 2);
    EXPECT_EQ(t.cross().size(), 2);
    // The local and cross Comms share the mesh; their messages (same tags) must not mix.
    int64_t in_l[2], in_c[2], mine_l = 100 + rank, mine_c = 200 + rank;
    t.local().Allgather(&mine_l, sizeof(int64_t), in_l);
    t.cross().Allgather(&mine_c, sizeof(int64_t), in_c);
    EXPECT_EQ(in_l[0], 100 + rank / 2 * 2);
    EXPECT_EQ(in_l[1], 101 + rank / 2 * 2);
    EXPECT_EQ(in_c[0], 200 + rank % 2);
    EXPECT_EQ(in_c[1], 202 + rank % 2);
    PointToPoint(t.local());
    PointToPoint(t.cross());
    std::unique_ptr<Transport> sub;
    ASSERT_TRUE(t.Subset({1, 2, 3}, &sub).ok());
    if (rank == 0) return;
    EXPECT_EQ(sub->size, 3);
    EXPECT_EQ(sub->num_hosts, 2);  // world ranks 1 | 2, 3
    EXPECT_EQ(sub->local_size, rank == 1 ? 1 : 2);
    Rounds(sub->rank, *sub);
  }));
}

TEST(Tcp, SingleRankNeedsNoNetwork) {
  TcpOptions o = Opts(0, 1, 0);
  std::unique_ptr<Transport> t;
  ASSERT_TRUE(CreateTcpTransport(o, &t).ok());
  EXPECT_EQ(t->size, 1);
  int x = 5, y = 0;
  Transfer tr[2] = {t->comm().Irecv(&y, sizeof(y), 0, 1), t->comm().Isend(&x, sizeof(x), 0, 1)};
  t->comm().WaitAll(2, tr);
  EXPECT_EQ(y, 5);
  t->Finalize();
  t->Finalize();  // idempotent
}

TEST(Tcp, Throughput) {
  const int port = FreePort();
  ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [](int rank, Transport& t) {
    constexpr size_t kBytes = 64 << 20;
    std::vector<char> buf(kBytes, 1);
    Transfer x = rank == 0 ? t.comm().Isend(buf.data(), kBytes, 1, 1)
                           : t.comm().Irecv(buf.data(), kBytes, 0, 1);
    t.comm().WaitAll(1, &x);  // warm up
    const int64_t start = NowMicros();
    for (int i = 0; i < 4; ++i) {
      x = rank == 0 ? t.comm().Isend(buf.data(), kBytes, 1, 1)
                    : t.comm().Irecv(buf.data(), kBytes, 0, 1);
      t.comm().WaitAll(1, &x);
    }
    const double secs = (NowMicros() - start) / 1e6;
    if (rank == 1) std::printf("loopback: %.2f GB/s one way\n", 4.0 * kBytes / secs / 1e9);
    EXPECT_LT(secs, 10.0);
  }));
}

// A receive posted while its message is still arriving into the unexpected buffer takes the
// rest directly (the message is larger than both kernel buffers together).
TEST(Tcp, ReceivePostedMidMessage) {
  const int port = FreePort();
  ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [](int rank, Transport& t) {
    constexpr size_t kBytes = 64 << 20;
    std::vector<char> big = rank == 0 ? Pattern(kBytes, 0, 1, 5) : std::vector<char>(kBytes);
    int32_t small = rank == 0 ? 77 : 0;
    if (rank == 0) {
      std::vector<Transfer> x = {t.comm().Isend(big.data(), kBytes, 1, 1),
                                 t.comm().Isend(&small, sizeof(small), 1, 9)};
      t.comm().WaitAll(&x);
      return;
    }
    Transfer later = t.comm().Irecv(&small, sizeof(small), 0, 9);
    // Once the kernel buffers are full, one test reads what they hold (a part of the big
    // message, unexpected) and leaves the rest in flight.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.comm().TestAll(1, &later);
    std::vector<Transfer> x = {later, t.comm().Irecv(big.data(), kBytes, 0, 1)};
    t.comm().WaitAll(&x);
    EXPECT_EQ(small, 77);
    EXPECT_EQ(big, Pattern(kBytes, 0, 1, 5));
  }));
}

// A large message that arrives before its receive waits in the kernel (held): the receive
// posted later takes it; a receive for a later message posted first buffers it instead.
TEST(Tcp, HeldMessageGoesToItsReceiveOrIsBuffered) {
  const int port = FreePort();
  ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [](int rank, Transport& t) {
    constexpr size_t kBig = 1 << 20, kSmall = 100 << 10;
    Comm& c = t.comm();
    for (int later_first = 0; later_first < 2; ++later_first) {
      std::vector<char> big = Pattern(kBig, 0, 1, later_first), small = Pattern(kSmall, 0, 1, 3);
      int go = 0;
      if (rank == 0) {
        std::vector<Transfer> x = {c.Isend(big.data(), kBig, 1, 1),
                                   c.Isend(small.data(), kSmall, 1, 2), c.Irecv(&go, 4, 1, 3)};
        c.WaitAll(&x);
        continue;
      }
      // A transfer of its own keeps the tests below reading: they meet the big one's header.
      Transfer x = c.Isend(&go, 4, 0, 3);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int i = 0; i < 3; ++i) c.TestAll(1, &x);
      std::vector<char> in_big(kBig), in_small(kSmall);
      std::vector<Transfer> r;
      if (later_first) r.push_back(c.Irecv(in_small.data(), kSmall, 0, 2));
      r.push_back(c.Irecv(in_big.data(), kBig, 0, 1));
      if (!later_first) r.push_back(c.Irecv(in_small.data(), kSmall, 0, 2));
      r.push_back(x);
      c.WaitAll(&r);
      EXPECT_EQ(in_big, big);
      EXPECT_EQ(in_small, small);
    }
  }));
}

// WaitAny, messages to itself, a receive smaller than its message, and a peer that finalized
// while nothing was pending with it (an error only once this rank wants something from it).
TEST(Tcp, WaitAnySelfAndMisuse) {
  int port = FreePort();
  ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [](int rank, Transport& t) {
    Comm& c = t.comm();
    int64_t a = 0, b = 0, one = 1, two = 2;
    if (rank == 0) {
      Transfer x[2] = {c.Irecv(&a, sizeof(a), 1, 1), c.Irecv(&b, sizeof(b), 1, 2)};
      EXPECT_EQ(c.WaitAny(2, x), 1);
      EXPECT_EQ(b, 2);
      EXPECT_EQ(c.WaitAny(2, x), 0);
      EXPECT_EQ(a, 1);
      EXPECT_EQ(c.WaitAny(2, x), -1);
      int64_t self = 0, mine = 42;
      Transfer y = c.Isend(&mine, sizeof(mine), 0, 4);  // before its receive: buffered
      c.WaitAll(1, &y);
      y = c.Irecv(&self, sizeof(self), 0, 4);
      c.WaitAll(1, &y);
      EXPECT_EQ(self, 42);
      std::vector<char> hundred(100, 'h');
      y = c.Isend(hundred.data(), hundred.size(), 1, 3);
      c.WaitAll(1, &y);
      return;
    }
    Transfer x = c.Isend(&two, sizeof(two), 0, 2);
    c.WaitAll(1, &x);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    x = c.Isend(&one, sizeof(one), 0, 1);
    c.WaitAll(1, &x);
    char ten[10];
    try {
      Transfer r = c.Irecv(ten, sizeof(ten), 0, 3);
      c.WaitAll(1, &r);
      ADD_FAILURE() << "a receive of 10 bytes took a message of 100";
    } catch (const TransportError& e) {
      EXPECT_EQ(e.peer(), 0);
      EXPECT_NE(std::string(e.what()).find("sent a message of 100 bytes with tag 3 to a receive "
                                           "of 10 bytes"),
                std::string::npos)
          << e.what();
    }
  }));
  port = FreePort();
  ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [](int rank, Transport& t) {
    if (rank == 0) return;  // finalizes at once
    int64_t never = 0;
    Transfer r = t.comm().Irecv(&never, sizeof(never), 1, 5);  // from itself: keeps tests going
    for (int i = 0; i < 50; ++i) {
      EXPECT_FALSE(t.comm().TestAll(1, &r));
      t.comm().Nap(2000);
    }
    try {
      t.comm().Isend(&never, sizeof(never), 0, 5);
      ADD_FAILURE() << "a send to a finalized peer was accepted";
    } catch (const TransportError& e) {
      EXPECT_EQ(e.peer(), 0);
      EXPECT_NE(std::string(e.what()).find("connection to rank 0 ("), std::string::npos);
    }
    EXPECT_THROW(t.comm().TestAll(1, &r), TransportError);  // every later call
  }));
}

// RFC 4231 test cases 1, 2 and 6 (a key longer than a block), and FIPS 180-2's "abc".

}  // namespace
}  // namespace hvd
