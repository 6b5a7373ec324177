// Single-copy transfers between ranks of one machine (csrc/transport/tcp/single_copy.h): ranks
// are threads of this process (tcp_harness.h), whose links move to Unix sockets and whose
// memory each may read, so every link of these jobs is single-copy unless a rank turns it off.
#include <sys/mman.h>

#include "tcp_harness.h"

namespace hvd {
namespace {

using namespace tcp_test;

constexpr size_t kBig = 1 << 20;  // above kSingleCopyBytes

// The send completes only once the receiver has taken the message (a descriptor crossed, the
// receiver copied and acknowledged); the receive may be posted after the descriptor arrived or
// before; IrecvUpTo reports the length; small messages and the control tags stay on the socket
// (their sends complete with no receive posted).
TEST(TcpSingleCopy, MessagesCompleteWhenTaken) {
  const int port = FreePort();
  std::atomic<bool> may_receive{false};
  ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [&](int rank, Transport& t) {
    EXPECT_EQ(static_cast<TcpTransport&>(t).single_copy_links(), 1);
    Comm& c = t.comm();
    std::vector<char> out = Pattern(kBig, 0, 1, 1), up = Pattern(200 << 10, 0, 1, 2);
    std::vector<char> small = Pattern(1000, 0, 1, 3), control = Pattern(kBig, 0, 1, 4);
    if (rank == 0) {
      Transfer big = c.Isend(out.data(), kBig, 1, 1);
      std::vector<Transfer> eager = {c.Isend(small.data(), small.size(), 1, 3),
                                     c.Isend(control.data(), kBig, 1, kTagUserMax + 50)};
      for (int i = 0; i < 30; ++i) {
        EXPECT_FALSE(c.TestAll(1, &big)) << "sent before its receive was posted";
        c.TestAll(2, eager.data());
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      c.WaitAll(2, eager.data());  // completes with no receive posted
      may_receive = true;
      std::vector<Transfer> rest = {big, c.Isend(up.data(), up.size(), 1, 2)};
      c.WaitAll(&rest);
      return;
    }
    while (!may_receive) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<char> in(kBig), in_up(kBig), in_small(1000), in_control(kBig);
    size_t got = 0;
    std::vector<Transfer> x = {c.IrecvUpTo(in_up.data(), kBig, 0, 2, &got),  // before its send
                               c.Irecv(in.data(), kBig, 0, 1),  // its descriptor waits: taken now
                               c.Irecv(in_small.data(), 1000, 0, 3),
                               c.Irecv(in_control.data(), kBig, 0, kTagUserMax + 50)};
    c.WaitAll(&x);
    EXPECT_EQ(in, out);
    EXPECT_EQ(got, up.size());
    EXPECT_EQ(0, std::memcmp(in_up.data(), up.data(), up.size()));
    EXPECT_EQ(in_small, small);
    EXPECT_EQ(in_control, control);
  }));
}

// HOROVOD_TCP_SINGLE_COPY=0 on one rank: it offers no probe and reads none, so neither side
// sends descriptors; a large send then completes with no receive posted (buffered).
TEST(TcpSingleCopy, OffOnOneRankKeepsTheSocket) {
  const int port = FreePort();
  std::vector<TcpOptions> opts = {Opts(0, 2, port), Opts(1, 2, port)};
  opts[1].single_copy = false;
  std::atomic<bool> sent{false};
  ExpectAllOk(RunRanks(opts, [&](int rank, Transport& t) {
    EXPECT_EQ(static_cast<TcpTransport&>(t).unix_links(), 1);
    EXPECT_EQ(static_cast<TcpTransport&>(t).single_copy_links(), 0);
    std::vector<char> out = Pattern(kBig, rank, 1 - rank, 5), in(kBig);
    Transfer s = t.comm().Isend(out.data(), kBig, 1 - rank, 1);
    t.comm().WaitAll(1, &s);
    if (rank == 0) sent = true;
    while (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Transfer r = t.comm().Irecv(in.data(), kBig, 1 - rank, 1);
    t.comm().WaitAll(1, &r);
    EXPECT_EQ(in, Pattern(kBig, 1 - rank, rank, 5));
  }));
}

// The sender's buffer gone before the receiver copies it (what a sender that abandoned its send
// leaves): the receiver's copy fails naming the sender, and the sender's send fails too (the
// receiver closed the link) rather than waiting for an acknowledgement that never comes.
// A receive too small for a descriptor's message fails as for any message.
TEST(TcpSingleCopy, FailedCopyAndShortReceiveAreNamed) {
  for (int short_receive = 0; short_receive < 2; ++short_receive) {
    const int port = FreePort();
    std::atomic<bool> gone{false};
    ExpectAllOk(RunRanks({Opts(0, 2, port), Opts(1, 2, port)}, [&](int rank, Transport& t) {
      Comm& c = t.comm();
      if (rank == 0) {
        void* mem = mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(mem, MAP_FAILED);
        Transfer s = c.Isend(mem, kBig, 1, 1);
        for (int i = 0; i < 5; ++i) c.TestAll(1, &s);  // the descriptor is out
        if (!short_receive) munmap(mem, kBig);
        gone = true;
        EXPECT_THROW(c.WaitAll(1, &s), TransportError);
        if (short_receive) munmap(mem, kBig);
        return;
      }
      while (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::vector<char> in(kBig);
      try {
        Transfer r = c.Irecv(in.data(), short_receive ? 1000 : kBig, 0, 1);
        c.WaitAll(1, &r);
        ADD_FAILURE() << "the copy succeeded";
      } catch (const TransportError& e) {
        EXPECT_EQ(e.peer(), 0);
        const std::string want = short_receive ? "sent a message of 1048576 bytes with tag 1 to a "
                                                 "receive of 1000 bytes"
                                               : "out of rank 0's memory";
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    }));
  }
}

}  // namespace
}  // namespace hvd
