// The watchdog's roll call over the TCP transport (roll_call_udp.h): notes between 3 ranks as
// threads (tcp_harness.h), to one peer and to all, with and without HOROVOD_SECRET_KEY, over
// IPv4 and IPv6 loopback; what the channel drops (a forger without the key, a sender not in the
// table, garbage, another job, a replay) through real datagrams on 127.0.0.1; and a job where one
// rank cannot bind its UDP socket, which then has no roll call on any rank and works as before.
#include <algorithm>
#include <map>

#include "tcp_harness.h"

namespace hvd {
namespace {

using namespace tcp_test;
using Notes = std::vector<std::pair<int, int64_t>>;

// Polls `poll` until `want` notes have come (5 s at most), then 50 ms more for strays.
Notes Collect(const std::function<void(Notes*)>& poll, size_t want) {
  Notes got;
  const int64_t deadline = NowMicros() + 5 * kSec;
  while (got.size() < want && NowMicros() < deadline) {
    poll(&got);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  poll(&got);
  std::sort(got.begin(), got.end());
  return got;
}

void NotesBetweenThreeRanks(const std::string& key, const std::string& addr = "127.0.0.1") {
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  for (int r = 0; r < 3; ++r) {
    opts.push_back(Opts(r, 3, port));
    opts.back().secret_key = key;
    opts.back().rendezvous_addr = addr;
  }
  std::map<int, Notes> got;
  std::mutex mu;
  ExpectAllOk(RunRanks(opts, [&](int rank, Transport& t) {
    ASSERT_TRUE(t.roll_call_available()) << "rank " << rank;
    if (rank == 0) t.SendNote(-1, 10);  // to every peer
    if (rank == 1) t.SendNote(2, 21);   // to one
    if (rank == 2) t.SendNote(0, 7);
    const size_t want = rank == 0 ? 1 : rank == 1 ? 1 : 2;
    Notes n = Collect([&](Notes* out) { t.PollNotes(out); }, want);
    ASSERT_EQ(t.BarrierWithin(10 * kSec), "");
    t.PollNotes(&n);  // nothing more came while the others finished
    auto* rc = static_cast<TcpTransport&>(t).roll_call_for_test();
    EXPECT_EQ(rc->drops().total(), 0) << "rank " << rank;
    std::lock_guard<std::mutex> lk(mu);
    got[rank] = n;
  }));
  EXPECT_EQ(got[0], (Notes{{2, 7}}));
  EXPECT_EQ(got[1], (Notes{{0, 10}}));
  EXPECT_EQ(got[2], (Notes{{0, 10}, {1, 21}}));
}

TEST(TcpRollCall, NotesWithoutKey) { NotesBetweenThreeRanks(""); }
TEST(TcpRollCall, NotesWithKey) { NotesBetweenThreeRanks("roll-call-key"); }

TEST(TcpRollCall, NotesOverIpv6) {
  const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool v6 = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  if (fd >= 0) close(fd);
  if (!v6) GTEST_SKIP() << "no IPv6 loopback here";
  NotesBetweenThreeRanks("roll-call-key", "::1");
}

// A UDP socket on 127.0.0.1 that is no rank's.
struct Stranger {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ~Stranger() { close(fd); }
  void SendTo(int port, const std::string& bytes) const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
};

TEST(TcpRollCall, DropsForgedStrayAndReplayedNotes) {
  const std::string key = "the job's key";
  const uint64_t job = 0x5eed;
  UdpRollCall ch[3];
  RendezvousResult table;
  table.job_id = job;
  for (int r = 0; r < 3; ++r) {
    std::string why;
    ASSERT_TRUE(ch[r].Bind("127.0.0.1", 0, &why)) << why;
    table.peers.push_back({"host", "127.0.0.1", ch[r].port()});
  }
  // Rank 1 is a forger at the right address without the key.
  for (int r = 0; r < 3; ++r) {
    std::string why;
    ASSERT_TRUE(ch[r].Start(table, r, r == 1 ? "a guess" : key, &why)) << why;
  }
  EXPECT_EQ(ch[0].AwaitHellos(300000), std::vector<int>{1});  // its hellos fail the mac too
  EXPECT_EQ(ch[0].drops().bad_mac, 1);                        // its one hello, at Start
  const UdpRollCall::Drops before = ch[0].drops();

  ch[1].Send(0, 40);  // bad mac
  Stranger s;
  s.SendTo(ch[0].port(), EncodeNote(key, job, 2, 0, 1000, 41));  // valid, but not from rank 2
  s.SendTo(ch[0].port(), "not a note");
  s.SendTo(ch[0].port(), EncodeNote(key, job + 1, 2, 0, 1001, 42));  // another job's
  // Rank 2's notes: a replay of a used counter is refused, a late one within the window is not.
  ch[2].set_next_counter_for_test(100);
  ch[2].Send(0, 8);
  ch[2].set_next_counter_for_test(100);
  ch[2].Send(0, 9);  // replay of 100
  ch[2].set_next_counter_for_test(90);
  ch[2].Send(0, 10);  // reordered: taken once
  ch[2].set_next_counter_for_test(90);
  ch[2].Send(0, 11);
  ch[2].set_next_counter_for_test(20);
  ch[2].Send(0, 12);  // 80 below the highest: too old to tell from a replay
  const Notes got = Collect([&](Notes* out) { ch[0].Poll(out); }, 2);
  EXPECT_EQ(got, (Notes{{2, 8}, {2, 10}}));
  const UdpRollCall::Drops d = ch[0].drops();
  EXPECT_EQ(d.bad_mac - before.bad_mac, 1);
  EXPECT_EQ(d.bad_source - before.bad_source, 1);
  EXPECT_EQ(d.malformed - before.malformed, 2);
  EXPECT_EQ(d.replayed - before.replayed, 3);
  // Closed: sends and polls are no-ops, never a use of a stale descriptor.
  ch[0].Close();
  ch[2].Send(0, 13);
  Notes none;
  ch[0].Poll(&none);
  EXPECT_TRUE(none.empty());
}

std::atomic<int> taken_udp{-1};

void TakeRank1sUdpPort(int rank, int port) {
  if (rank != 1) return;
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  taken_udp = fd;
}

TEST(TcpRollCall, OffEverywhereWhenOneRankCannotBind) {
  SetTcpListenerHookForTest(TakeRank1sUdpPort);
  const int port = FreePort();
  std::vector<TcpOptions> opts;
  for (int r = 0; r < 3; ++r) opts.push_back(Opts(r, 3, port));
  std::atomic<int> with_roll_call{0};
  ExpectAllOk(RunRanks(opts, [&](int rank, Transport& t) {
    if (t.roll_call_available()) ++with_roll_call;
    t.SendNote(-1, 4);  // harmless without a channel
    Rounds(rank, t);    // the job works as before
  }));
  SetTcpListenerHookForTest(nullptr);
  close(taken_udp.exchange(-1));
  EXPECT_EQ(with_roll_call.load(), 0);
}

}  // namespace
}  // namespace hvd
