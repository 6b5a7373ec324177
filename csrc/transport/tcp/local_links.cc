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
#include <vector>

#include "common/logging.h"
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
};

}  // namespace

Status MoveLocalLinksToUnixSockets(TcpMesh* mesh, bool offer, int64_t timeout_us, int* moved) {
  *moved = 0;
  const int me = mesh->rank(), size = mesh->size();
  if (size == 1) return Status();
  const int64_t deadline = NowMicros() + timeout_us;
  const std::string machine = MachineId();
  UniqueFd listener;
  const std::string name = offer ? ListenUnix(size, &listener) : "";
  auto failed = [&](int q, const std::string& what, const Status& s) {
    return Status::Internal("rank " + std::to_string(me) + " lost its connection to rank " +
                            std::to_string(q) + " (" + mesh->PeerAddr(q) + ") while " + what +
                            ": " + s.message());
  };

  // Every offer out first: a few dozen bytes each, which the kernel's buffers take at once.
  std::vector<Token> mine(size);
  for (int q = 0; q < size; ++q) {
    if (q == me) continue;
    RandomBytes(mine[q].data(), mine[q].size());
    WireWriter w;
    w.U32(kLocalMagic);
    w.Str(machine);
    w.Str(name);
    w.Bytes(mine[q].data(), mine[q].size());
    Status s = WriteFrameBy(mesh->PeerFd(q), w.data(), deadline);
    if (!s.ok()) return failed(q, "offering a local link", s);
  }
  std::vector<Offer> theirs(size);
  std::vector<bool> local(size, false);
  for (int q = 0; q < size; ++q) {
    if (q == me) continue;
    std::string frame;
    Status s = ReadFrameBy(mesh->PeerFd(q), 1024, deadline, &frame);
    if (!s.ok()) return failed(q, "reading its local-link offer", s);
    WireReader r(frame);
    Offer& o = theirs[q];
    const uint32_t magic = r.U32();
    o.machine = r.Str();
    o.listener = r.Str();
    r.Bytes(o.token.data(), o.token.size());
    if (magic != kLocalMagic || !r.done())
      return Status::Internal("rank " + std::to_string(q) + " sent a malformed local-link offer");
    local[q] = o.machine == machine && !o.listener.empty() && !name.empty();
  }

  // Dial the lower ranks: the connects complete in their listeners' backlogs, so no rank waits
  // here on another's progress.
  std::vector<UniqueFd> unix_fd(size);
  for (int q = 0; q < me; ++q) {
    if (!local[q]) continue;
    UniqueFd fd = ConnectUnix(theirs[q].listener);
    if (fd.valid() &&
        !WriteAllBy(fd.get(), theirs[q].token.data(), theirs[q].token.size(), deadline).ok())
      fd.reset();
    const uint8_t verdict = fd.valid() ? 1 : 0;
    Status s = WriteAllBy(mesh->PeerFd(q), &verdict, 1, deadline);
    if (!s.ok()) return failed(q, "moving to a local link", s);
    if (!fd.valid())
      HVD_LOG(DEBUG, "rank " << me << " cannot reach rank " << q
                             << "'s Unix socket (another network namespace?): keeps TCP");
    unix_fd[q] = std::move(fd);
  }
  // Accept the higher ranks that connected, matching each connection by the token it sends.
  int expected = 0;
  for (int q = me + 1; q < size; ++q) {
    if (!local[q]) continue;
    uint8_t verdict = 0;
    Status s = ReadExactBy(mesh->PeerFd(q), &verdict, 1, deadline);
    if (!s.ok()) return failed(q, "moving to a local link", s);
    if (verdict == 1)
      ++expected;
    else
      local[q] = false;
  }
  while (expected > 0) {
    const int64_t left = deadline - NowMicros();
    if (left <= 0)
      return Status::Internal("rank " + std::to_string(me) +
                              ": peers on this machine connected to its Unix socket but did not "
                              "arrive within " +
                              SecondsString(timeout_us));
    pollfd pfd{listener.get(), POLLIN, 0};
    poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left / 1000 + 1, 100)));
    int raw;
    while ((raw = AcceptNonBlocking(listener.get(), nullptr)) >= 0) {
      UniqueFd fd(raw);
      Token got{};
      // The dialer wrote its token before its verdict: it is here.
      if (!ReadExactBy(fd.get(), got.data(), got.size(), deadline).ok()) continue;
      for (int q = me + 1; q < size; ++q)
        if (local[q] && !unix_fd[q].valid() && got == mine[q]) {
          unix_fd[q] = std::move(fd);
          --expected;
          break;
        }
      if (fd.valid()) HVD_LOG(WARNING, "rank " << me << " refused a stray on its Unix socket");
    }
  }
  for (int q = 0; q < size; ++q) {
    if (!unix_fd[q].valid()) continue;
    TuneDataSocket(unix_fd[q].get());  // the buffers; TCP_NODELAY does not apply
    mesh->SetPeer(q, std::move(unix_fd[q]), mesh->PeerAddr(q) + ", over a Unix socket");
    ++*moved;
  }
  return Status();
}

}  // namespace hvd
