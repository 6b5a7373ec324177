// The TCP transport's setup (csrc/transport/tcp/): HMAC-SHA256 against RFC 4231, and the
// rendezvous' and handshake's failures with ranks as threads (tcp_harness.h): a wrong secret,
// disagreeing world sizes, a duplicate rank, a missing rank and an unreachable server, strays on
// the listeners, a peer that leaves mid-transfer, a rendezvous port in use, and the options read
// from torchrun's and Gloo's variables. Each failure case runs with a short timeout.
#include "tcp_harness.h"

namespace hvd {
namespace {

using namespace tcp_test;

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
