// Moving same-machine links to Unix sockets; the protocol is in local_links.h.
#include "transport/tcp/local_links.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "transport/tcp/single_copy.h"
#include "transport/tcp/socket_util.h"

namespace hvd {
namespace {

constexpr uint32_t kLocalMagic = 0x55445648;  // "HVDU"
using Token = std::array<uint8_t, 32>;

// An abstract address (Linux: no file, gone with the socket): a leading NUL, then `name`.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* a) {
  std::memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(a->sun_path) - 1);
  std::memcpy(a->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// A listener on a fresh random name; "" and no listener where the kernel refuses one.
std::string ListenUnix(int backlog, UniqueFd* out) {
  uint8_t raw[16];
  RandomBytes(raw, sizeof(raw));
  std::string name = "horovod-";
  for (uint8_t b : raw) {
    name += "0123456789abcdef"[b >> 4];
    name += "0123456789abcdef"[b & 15];
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a;
  const socklen_t len = AbstractAddress(name, &a);
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      listen(fd.get(), backlog) != 0)
    return "";
  SetNonBlocking(fd.get());
  *out = std::move(fd);
  return name;
}

// A connection to the listener `name`, nonblocking; invalid if it cannot be reached.
UniqueFd ConnectUnix(const std::string& name) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a;
  const socklen_t len = AbstractAddress(name, &a);
  // Blocking: the listener's backlog holds every peer, so the kernel completes it at once.
  while (fd.valid() && connect(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
    if (errno == EINTR) continue;
    fd.reset();
  }
  if (fd.valid()) SetNonBlocking(fd.get());
  return fd;
}

struct Offer {
  std::string machine, listener;
  Token token{};
  ProbeWord probe;  // addr 0: no single-copy transfers from that rank
};

// One MoveLocalLinksToUnixSockets call: the state its steps share, in the order they run.
class LocalLinkMover {
 public:
  LocalLinkMover(TcpMesh* mesh, bool offer, bool single_copy, int64_t timeout_us)
      : mesh_(mesh),
        single_copy_(offer && single_copy),
        me_(mesh->rank()),
        size_(mesh->size()),
        timeout_us_(timeout_us),
        deadline_(NowMicros() + timeout_us),
        machine_(MachineId()),
        name_(offer ? ListenUnix(size_, &listener_) : ""),
        mine_(size_),
        theirs_(size_),
        local_(size_, false),
        unix_fd_(size_),
        reads_them_(size_, 0),
        they_read_(size_, 0) {
    if (single_copy_) AllowPeersToReadMemory();
  }

  Status Run(int* moved, int* single_copy) {
    Status s = SendOffers();
    if (s.ok()) s = ReadOffers();
    if (s.ok()) s = DialLowerRanks();
    int expected = 0;
    if (s.ok()) s = ReadVerdicts(&expected);
    if (s.ok()) s = AcceptHigherRanks(expected);
    if (s.ok()) s = ProbeSingleCopy();
    if (!s.ok()) return s;
    for (int q = 0; q < size_; ++q) {
      if (!unix_fd_[q].valid()) continue;
      TuneDataSocket(unix_fd_[q].get());  // the buffers; TCP_NODELAY does not apply
      mesh_->SetPeer(q, std::move(unix_fd_[q]), mesh_->PeerAddr(q) + ", over a Unix socket");
      mesh_->SetSingleCopy(q, reads_them_[q], they_read_[q] != 0);
      ++*moved;
      if (they_read_[q]) ++*single_copy;
    }
    return Status();
  }

 private:
  Status Failed(int q, const std::string& what, const Status& s) const {
    return Status::Internal("rank " + std::to_string(me_) + " lost its connection to rank " +
                            std::to_string(q) + " (" + mesh_->PeerAddr(q) + ") while " + what +
                            ": " + s.message());
  }

  // Every offer out first: a few dozen bytes each, which the kernel's buffers take at once.
  Status SendOffers() {
    for (int q = 0; q < size_; ++q) {
      if (q == me_) continue;
      RandomBytes(mine_[q].data(), mine_[q].size());
      WireWriter w;
      w.U32(kLocalMagic);
      w.Str(machine_);
      w.Str(name_);
      w.Bytes(mine_[q].data(), mine_[q].size());
      const ProbeWord probe = single_copy_ ? OwnProbeWord() : ProbeWord{};
      w.U64(probe.addr);
      w.U64(probe.value);
      Status s = WriteFrameBy(mesh_->PeerFd(q), w.data(), deadline_);
      if (!s.ok()) return Failed(q, "offering a local link", s);
    }
    return Status();
  }

  // Every peer's offer; a pair moves where both are on this machine with a listener.
  Status ReadOffers() {
    for (int q = 0; q < size_; ++q) {
      if (q == me_) continue;
      std::string frame;
      Status s = ReadFrameBy(mesh_->PeerFd(q), 1024, deadline_, &frame);
      if (!s.ok()) return Failed(q, "reading its local-link offer", s);
      WireReader r(frame);
      Offer& o = theirs_[q];
      const uint32_t magic = r.U32();
      o.machine = r.Str();
      o.listener = r.Str();
      r.Bytes(o.token.data(), o.token.size());
      o.probe.addr = r.U64();
      o.probe.value = r.U64();
      if (magic != kLocalMagic || !r.done())
        return Status::Internal("rank " + std::to_string(q) + " sent a malformed local-link offer");
      local_[q] = o.machine == machine_ && !o.listener.empty() && !name_.empty();
    }
    return Status();
  }

  // Dial the lower ranks: the connects complete in their listeners' backlogs, so no rank waits
  // here on another's progress.
  Status DialLowerRanks() {
    for (int q = 0; q < me_; ++q) {
      if (!local_[q]) continue;
      UniqueFd fd = ConnectUnix(theirs_[q].listener);
      if (fd.valid() &&
          !WriteAllBy(fd.get(), theirs_[q].token.data(), theirs_[q].token.size(), deadline_).ok())
        fd.reset();
      const uint8_t verdict = fd.valid() ? 1 : 0;
      Status s = WriteAllBy(mesh_->PeerFd(q), &verdict, 1, deadline_);
      if (!s.ok()) return Failed(q, "moving to a local link", s);
      if (!fd.valid())
        HVD_LOG(DEBUG, "rank " << me_ << " cannot reach rank " << q
                               << "'s Unix socket (another network namespace?): keeps TCP");
      unix_fd_[q] = std::move(fd);
    }
    return Status();
  }

  // Each higher local rank's verdict: *expected counts those that connected.
  Status ReadVerdicts(int* expected) {
    for (int q = me_ + 1; q < size_; ++q) {
      if (!local_[q]) continue;
      uint8_t verdict = 0;
      Status s = ReadExactBy(mesh_->PeerFd(q), &verdict, 1, deadline_);
      if (!s.ok()) return Failed(q, "moving to a local link", s);
      if (verdict == 1)
        ++*expected;
      else
        local_[q] = false;
    }
    return Status();
  }

  // Accept the higher ranks that connected, matching each connection by the token it sends.
  Status AcceptHigherRanks(int expected) {
    while (expected > 0) {
      const int64_t left = deadline_ - NowMicros();
      if (left <= 0)
        return Status::Internal("rank " + std::to_string(me_) +
                                ": peers on this machine connected to its Unix socket but did "
                                "not arrive within " +
                                SecondsString(timeout_us_));
      pollfd pfd{listener_.get(), POLLIN, 0};
      poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left / 1000 + 1, 100)));
      int raw;
      while ((raw = AcceptNonBlocking(listener_.get(), nullptr)) >= 0) {
        UniqueFd fd(raw);
        Token got{};
        // The dialer wrote its token before its verdict: it is here.
        if (!ReadExactBy(fd.get(), got.data(), got.size(), deadline_).ok()) continue;
        for (int q = me_ + 1; q < size_; ++q)
          if (local_[q] && !unix_fd_[q].valid() && got == mine_[q]) {
            unix_fd_[q] = std::move(fd);
            --expected;
            break;
          }
        if (fd.valid()) HVD_LOG(WARNING, "rank " << me_ << " refused a stray on its Unix socket");
      }
    }
    return Status();
  }

  // On every moved link: whether this rank can read the peer's probe word (through the Unix
  // socket's peer pid), and the peer's answer to the same question; one byte each way on TCP,
  // all written before any is read.
  Status ProbeSingleCopy() {
    for (int q = 0; q < size_; ++q) {
      if (!unix_fd_[q].valid()) continue;
      const pid_t pid = UnixPeerPid(unix_fd_[q].get());
      if (single_copy_ && CanReadProbe(pid, theirs_[q].probe)) reads_them_[q] = pid;
      const uint8_t verdict = reads_them_[q] ? 1 : 0;
      Status s = WriteAllBy(mesh_->PeerFd(q), &verdict, 1, deadline_);
      if (!s.ok()) return Failed(q, "probing single-copy transfers", s);
    }
    for (int q = 0; q < size_; ++q) {
      if (!unix_fd_[q].valid()) continue;
      uint8_t verdict = 0;
      Status s = ReadExactBy(mesh_->PeerFd(q), &verdict, 1, deadline_);
      if (!s.ok()) return Failed(q, "probing single-copy transfers", s);
      they_read_[q] = verdict == 1 && single_copy_;
      if (single_copy_ && theirs_[q].probe.addr != 0 && !reads_them_[q])
        HVD_LOG(DEBUG, "rank " << me_ << " cannot read rank " << q
                               << "'s memory (ptrace rules): its messages come over the socket");
    }
    return Status();
  }

  TcpMesh* const mesh_;
  const bool single_copy_;
  const int me_, size_;
  const int64_t timeout_us_, deadline_;
  const std::string machine_;
  UniqueFd listener_;  // declared before name_, which ListenUnix fills it with
  const std::string name_;
  std::vector<Token> mine_;    // the token sent to each peer
  std::vector<Offer> theirs_;  // each peer's offer
  std::vector<bool> local_;    // the pair may move
  std::vector<UniqueFd> unix_fd_;
  std::vector<pid_t> reads_them_;   // the peer's pid where this rank can read its memory, else 0
  std::vector<uint8_t> they_read_;  // the peer can read this rank's memory
};

}  // namespace

Status MoveLocalLinksToUnixSockets(TcpMesh* mesh, bool offer, bool single_copy, int64_t timeout_us,
                                   int* moved, int* single_copy_links) {
  *moved = 0;
  *single_copy_links = 0;
  if (mesh->size() == 1) return Status();
  return LocalLinkMover(mesh, offer, single_copy, timeout_us).Run(moved, single_copy_links);
}

}  // namespace hvd
