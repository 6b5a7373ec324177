// The TCP transport (csrc/transport/tcp/): ranks are threads of this process, each with its own
// TcpTransport over 127.0.0.1, meeting at a rendezvous on a free port. Covers the data path
// (sizes 0 B to 8 MiB, out-of-order posting, the control rounds, Bcast, topology, SubComm and
// Subset), HMAC-SHA256 against RFC 4231, and the setup's failures: a wrong secret, disagreeing
// world sizes, a duplicate rank, a missing rank, strays on the listeners, a peer that leaves
// mid-transfer and a rendezvous port in use. Each failure case runs with a short timeout.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include "common/common.h"
#include "transport/tcp/hmac_sha256.h"
#include "transport/tcp/rendezvous.h"
#include "transport/tcp/tcp_transport.h"

namespace hvd {
namespace {

constexpr int64_t kSec = 1000000;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

int CountEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

TcpOptions Opts(int rank, int size, int port, int64_t timeout_us = 20 * kSec) {
  TcpOptions o;
  o.rank = rank;
  o.size = size;
  o.rendezvous_addr = "127.0.0.1";
  o.rendezvous_port = port;
  o.host_rendezvous = rank == 0;
  o.hostname = "host" + std::to_string(rank);
  o.timeout_us = timeout_us;
  return o;
}

// Forms one transport per options entry, each on its own thread, then runs body(rank, t) on
// that thread (if every rank formed). Exceptions fail the test.
std::vector<Status> RunRanks(const std::vector<TcpOptions>& opts,
                             const std::function<void(int, Transport&)>& body = nullptr) {
  const int n = static_cast<int>(opts.size());
  std::vector<Status> st(n);
  std::vector<std::unique_ptr<Transport>> ts(n);
  std::vector<std::thread> threads;
  std::atomic<int> formed{0}, checked{0};
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      st[i] = CreateTcpTransport(opts[i], &ts[i]);
      if (st[i].ok()) ++formed;
      ++checked;
      while (checked.load() < n) std::this_thread::yield();
      if (formed.load() == n && body) {
        try {
          body(opts[i].rank, *ts[i]);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << opts[i].rank << ": " << e.what();
        }
      }
      if (ts[i]) ts[i]->Finalize();
    });
  for (auto& t : threads) t.join();
  return st;
}

void ExpectAllOk(const std::vector<Status>& st) {
  for (size_t i = 0; i < st.size(); ++i) EXPECT_TRUE(st[i].ok()) << i << ": " << st[i].message();
}

std::vector<char> Pattern(size_t bytes, int from, int to, int salt) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(i * 131 + from * 17 + to * 7 + salt);
  return v;
}

// Point-to-point with every peer: sends first (so messages arrive before their receives are
// posted and are buffered), receives in reverse order; then receives first, then sends.
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
  c.WaitAll(&t);
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

void Rounds(int rank, Transport& t) {
  const int n = t.size;
  std::vector<std::string> all = t.AllgatherStrings(std::string(rank * 3, 'a' + rank));
  ASSERT_EQ(static_cast<int>(all.size()), n);
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], std::string(q * 3, 'a' + q));
  std::vector<std::string> g = t.GatherToRoot("blob" + std::to_string(rank));
  if (rank == 0) {
    for (int q = 0; q < n; ++q) EXPECT_EQ(g[q], "blob" + std::to_string(q));
  } else {
    EXPECT_TRUE(g.empty());
  }
  std::string b = rank == 0 ? std::string(100000, 'z') : "";
  t.BroadcastFromRoot(&b);
  EXPECT_EQ(b, std::string(100000, 'z'));
  std::vector<uint64_t> bits = {~0ull, ~0ull ^ (1ull << rank), 0xffull};
  t.BitAndAllreduce(&bits, rank % 2 == 0);
  uint64_t want = ~0ull;
  for (int q = 0; q < n; ++q) want &= ~(1ull << q);
  EXPECT_EQ(bits[0], ~0ull);
  EXPECT_EQ(bits[1], want);
  EXPECT_EQ(bits[2], 0xffull);
  std::vector<char> mine(rank * 10 + 1, static_cast<char>('0' + rank));
  std::vector<std::vector<char>> msgs;
  std::vector<size_t> lens;
  t.ExchangeRound(mine, 1000, &msgs, &lens, true);
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    ASSERT_EQ(lens[q], static_cast<size_t>(q * 10 + 1));
    EXPECT_EQ(msgs[q][0], '0' + q);
  }
  // Bcast of 3 MiB from the last rank (a pipelined chain of 1 MiB pieces).
  std::vector<char> big = rank == n - 1 ? Pattern(3 << 20, 9, 9, 9) : std::vector<char>(3 << 20);
  t.comm().Bcast(big.data(), big.size(), n - 1);
  EXPECT_EQ(big, Pattern(3 << 20, 9, 9, 9));
}

class TcpSizes : public ::testing::TestWithParam<int> {};

TEST_P(TcpSizes, MessagesRoundsBcastSubsets) {
  const int n = GetParam();
  const int fds = CountEntries("/proc/self/fd"), tasks = CountEntries("/proc/self/task");
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  // Links between ranks of one machine move to Unix sockets unless a rank keeps TCP: all move at
  // 2 ranks; at 3 rank 1 keeps TCP (links 0-1 and 1-2 stay TCP, 0-2 moves); at 4 none move.
  auto keeps_tcp = [n](int r) { return n == 4 || (n == 3 && r == 1); };
  for (int r = 0; r < n; ++r) {
    opts.push_back(Opts(r, n, port));
    opts.back().local_unix_sockets = !keeps_tcp(r);
  }
  ExpectAllOk(RunRanks(opts, [n, keeps_tcp](int rank, Transport& t) {
    int moved = 0;
    for (int q = 0; q < n; ++q) moved += q != rank && !keeps_tcp(q) && !keeps_tcp(rank);
    EXPECT_EQ(static_cast<TcpTransport&>(t).unix_links(), moved);
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
TEST(HmacSha256, Rfc4231) {
  Sha256 h;
  h.Update("abc", 3);
  EXPECT_EQ(DigestHex(h.Finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(DigestHex(HmacSha256(std::string(20, '\x0b'), "Hi There", 8)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string m2 = "what do ya want for nothing?";
  EXPECT_EQ(DigestHex(HmacSha256("Jefe", m2.data(), m2.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(DigestHex(HmacSha256(std::string(131, '\xaa'), m6.data(), m6.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Tcp, SecretKey) {
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  for (int r = 0; r < 3; ++r) {
    opts.push_back(Opts(r, 3, port));
    opts.back().secret_key = "s3cret";
  }
  ExpectAllOk(RunRanks(opts, [](int rank, Transport& t) { Rounds(rank, t); }));
  for (TcpOptions& o : opts) o.timeout_us = kSec;
  opts[2].secret_key = "wrong";
  const int64_t start = NowMicros();
  std::vector<Status> st = RunRanks(opts);
  EXPECT_LT(NowMicros() - start, 5 * kSec);
  EXPECT_NE(st[2].message().find("authentication failed"), std::string::npos) << st[2].message();
  EXPECT_NE(st[2].message().find("HOROVOD_SECRET_KEY"), std::string::npos);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(st[r].message().find("missing: rank 2"), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("claiming rank 2 failed authentication"), std::string::npos)
        << st[r].message();
  }
}

TEST(Tcp, WorldSizeDisagreement) {
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  for (int r = 0; r < 4; ++r) opts.push_back(Opts(r, 4, port, 3 * kSec));
  opts[1].size = 3;
  std::vector<Status> st = RunRanks(opts);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(st[r].message().find("disagree on the world size"), std::string::npos)
        << st[r].message();
    EXPECT_NE(st[r].message().find("rank 1 says 3"), std::string::npos) << st[r].message();
  }
}

TEST(Tcp, DuplicateRank) {
  const int port = FreePort();
  // Rank 2 stays away, so the job cannot form before the second rank 1 arrives.
  std::vector<TcpOptions> opts = {Opts(0, 3, port, kSec), Opts(1, 3, port, kSec),
                                  Opts(1, 3, port, kSec)};
  opts[2].hostname = "other";
  std::vector<Status> st = RunRanks(opts);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(st[r].message().find("rank 1 was claimed by two processes (hosts "),
              std::string::npos)
        << st[r].message();
  }
  EXPECT_NE(st[0].message().find("other"), std::string::npos) << st[0].message();
}

TEST(Tcp, MissingRankAndUnreachableServer) {
  const int port = FreePort();
  const int64_t start = NowMicros();
  std::vector<Status> st = RunRanks({Opts(0, 3, port, kSec), Opts(1, 3, port, kSec)});
  EXPECT_LT(NowMicros() - start, 4 * kSec);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(st[r].message().find("2 of 3 ranks registered; missing: rank 2"), std::string::npos)
        << st[r].message();
    EXPECT_NE(st[r].message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  }
  // No server at all.
  st = RunRanks({Opts(1, 2, port, kSec / 2)});
  EXPECT_NE(st[0].message().find("cannot reach the rendezvous server at 127.0.0.1:" +
                                 std::to_string(port) + " within 0.5 s"),
            std::string::npos)
      << st[0].message();
}

std::mutex stray_mu;
std::vector<int> stray_fds;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// On each rank's data listener: one connection of garbage, one of silence, one with the right
// magic but a made-up job.
void Strays(int rank, int port) {
  std::lock_guard<std::mutex> lock(stray_mu);
  if (rank > 1) return;
  int fd = Connect(port);
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  EXPECT_GT(send(fd, junk, sizeof(junk), 0), 0);
  stray_fds.push_back(fd);
  stray_fds.push_back(Connect(port));
  fd = Connect(port);
  WireWriter w;
  w.U32(kMeshMagic);
  w.U32(kTcpProtocolVersion);
  w.U64(12345);
  w.I32(rank + 1);
  w.Bytes(std::string(32, '\0').data(), 32);
  EXPECT_GT(send(fd, w.data().data(), w.data().size(), 0), 0);
  stray_fds.push_back(fd);
}

TEST(Tcp, StrayConnectionsAreRefused) {
  const int port = FreePort();
  // A server run by a driver (not a rank), with strays arriving before the ranks.
  testing::internal::CaptureStderr();
  RendezvousServer server;
  ASSERT_TRUE(server.Start("127.0.0.1", port, 3, "", 10 * kSec).ok());
  EXPECT_EQ(server.port(), port);
  int garbage = Connect(port), silent = Connect(port);
  EXPECT_GT(send(garbage, "\xff\xff\xff\xff garbage", 12, 0), 0);
  SetTcpListenerHookForTest(&Strays);
  std::vector<TcpOptions> opts;
  for (int r = 0; r < 3; ++r) {
    opts.push_back(Opts(r, 3, port));
    opts.back().host_rendezvous = false;
  }
  ExpectAllOk(RunRanks(opts, [](int rank, Transport& t) { Rounds(rank, t); }));
  const std::string log = testing::internal::GetCapturedStderr();
  SetTcpListenerHookForTest(nullptr);
  EXPECT_TRUE(server.Wait().ok());
  EXPECT_NE(log.find("rendezvous: refused the connection from 127.0.0.1:"), std::string::npos)
      << log;
  EXPECT_NE(log.find("rank 0 refused a connection from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("not a Horovod peer"), std::string::npos) << log;
  EXPECT_NE(log.find("a peer of another job"), std::string::npos) << log;
  close(garbage);
  close(silent);
  for (int fd : stray_fds) close(fd);
  stray_fds.clear();
}

// A peer leaves in the middle of a transfer: the other's wait throws, naming it, and so does
// every later post.
TEST(Tcp, PeerLeavesMidTransfer) {
  for (int leaver = 0; leaver < 2; ++leaver) {
    const int port = FreePort();
    std::atomic<bool> posted{false};
    ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [&](int rank, Transport& t) {
      if (rank == leaver) {
        while (!posted) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        t.Finalize();
        return;
      }
      const int other = 1 - rank;
      std::vector<char> buf(64 << 20, 3);
      // The survivor sends 64 MiB (when rank 0 survives) or waits for it (rank 1).
      Transfer x = rank == 0 ? t.comm().Isend(buf.data(), buf.size(), other, 1)
                             : t.comm().Irecv(buf.data(), buf.size(), other, 1);
      posted = true;
      try {
        t.comm().WaitAll(1, &x);
        ADD_FAILURE() << "the transfer completed";
      } catch (const TransportError& e) {
        EXPECT_EQ(e.peer(), other);
        EXPECT_NE(std::string(e.what()).find("connection to rank " + std::to_string(other) +
                                             " (127.0.0.1:"),
                  std::string::npos)
            << e.what();
      }
      int y = 0;
      EXPECT_THROW(t.comm().Isend(&y, sizeof(y), other, 2), TransportError);
    }));
  }
}

TEST(Tcp, RendezvousPortInUse) {
  const int port = FreePort();
  RendezvousServer first;
  ASSERT_TRUE(first.Start("", port, 2, "", 5 * kSec).ok());
  RendezvousServer second;
  Status s = second.Start("", port, 2, "", 5 * kSec);
  EXPECT_NE(s.message().find("0.0.0.0:" + std::to_string(port)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s.message();
  std::unique_ptr<Transport> t;
  s = CreateTcpTransport(Opts(0, 2, port, kSec), &t);
  EXPECT_NE(s.message().find(":" + std::to_string(port) + ": Address already in use"),
            std::string::npos)
      << s.message();
  first.Stop();
}

struct EnvGuard {
  std::vector<std::string> names;
  void Set(const char* n, const char* v) {
    setenv(n, v, 1);
    names.push_back(n);
  }
  ~EnvGuard() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};

TEST(TcpOptions, FromEnvironment) {
  {
    EnvGuard env;
    EXPECT_FALSE(TcpEnvironmentPresent());
    env.Set("RANK", "0");
    env.Set("WORLD_SIZE", "4");
    env.Set("LOCAL_RANK", "0");
    env.Set("LOCAL_WORLD_SIZE", "2");
    env.Set("MASTER_ADDR", "10.1.2.3");
    env.Set("MASTER_PORT", "29500");
    env.Set("HOROVOD_RENDEZVOUS_TIMEOUT", "7.5");
    env.Set("HOROVOD_SECRET_KEY", "k");
    env.Set("HOROVOD_TOPOLOGY_RANKS_PER_HOST", "2");
    EXPECT_TRUE(TcpEnvironmentPresent());
    TcpOptions o;
    ASSERT_TRUE(TcpOptionsFromEnvironment(&o).ok());
    EXPECT_EQ(o.rank, 0);
    EXPECT_EQ(o.size, 4);
    EXPECT_EQ(o.local_size, 2);
    EXPECT_EQ(o.rendezvous_addr, "10.1.2.3");
    EXPECT_EQ(o.rendezvous_port, 29501);
    EXPECT_TRUE(o.host_rendezvous);
    EXPECT_EQ(o.timeout_us, 7500000);
    EXPECT_EQ(o.secret_key, "k");
    EXPECT_EQ(o.ranks_per_host, 2);
    env.Set("HOROVOD_RENDEZVOUS_PORT", "4000");
    env.Set("RANK", "3");
    o = TcpOptions();
    ASSERT_TRUE(TcpOptionsFromEnvironment(&o).ok());
    EXPECT_EQ(o.rendezvous_port, 4000);
    EXPECT_FALSE(o.host_rendezvous);
    // Upstream's Gloo variables take precedence.
    env.Set("HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.9.9.9");
    env.Set("HOROVOD_GLOO_RENDEZVOUS_PORT", "5555");
    env.Set("HOROVOD_RANK", "0");
    env.Set("HOROVOD_SIZE", "2");
    env.Set("HOROVOD_HOSTNAME", "nodeA");
    o = TcpOptions();
    ASSERT_TRUE(TcpOptionsFromEnvironment(&o).ok());
    EXPECT_EQ(o.rendezvous_addr, "10.9.9.9");
    EXPECT_EQ(o.rendezvous_port, 5555);
    EXPECT_EQ(o.size, 2);
    EXPECT_EQ(o.hostname, "nodeA");
    EXPECT_TRUE(o.host_rendezvous);
    env.Set("HOROVOD_RENDEZVOUS_SERVER", "external");
    o = TcpOptions();
    ASSERT_TRUE(TcpOptionsFromEnvironment(&o).ok());
    EXPECT_FALSE(o.host_rendezvous);
    env.Set("HOROVOD_GLOO_IFACE", "lo");
    o = TcpOptions();
    ASSERT_TRUE(TcpOptionsFromEnvironment(&o).ok());
    EXPECT_EQ(o.bind_addr, "127.0.0.1");
    // Garbled values are named.
    env.Set("HOROVOD_GLOO_RENDEZVOUS_PORT", "55x");
    Status s = TcpOptionsFromEnvironment(&o);
    EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("HOROVOD_GLOO_RENDEZVOUS_PORT"), std::string::npos);
    env.Set("HOROVOD_GLOO_RENDEZVOUS_PORT", "5555");
    env.Set("HOROVOD_RANK", "2");
    s = TcpOptionsFromEnvironment(&o);
    EXPECT_NE(s.message().find("HOROVOD_RANK"), std::string::npos) << s.message();
    env.Set("HOROVOD_RANK", "1");
    env.Set("HOROVOD_RENDEZVOUS_TIMEOUT", "soon");
    s = TcpOptionsFromEnvironment(&o);
    EXPECT_NE(s.message().find("HOROVOD_RENDEZVOUS_TIMEOUT"), std::string::npos);
  }
  EnvGuard env;
  env.Set("RANK", "0");
  env.Set("WORLD_SIZE", "2");
  env.Set("MASTER_ADDR", "h");
  TcpOptions o;
  Status s = TcpOptionsFromEnvironment(&o);
  EXPECT_NE(s.message().find("MASTER_PORT is not set"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hvd
