// The full mesh's connections and handshakes; the protocol is in mesh_setup.h.
#include "transport/tcp/mesh_setup.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "common/logging.h"

namespace hvd {
namespace {

constexpr size_t kHelloBytes = 40, kProofBytes = 52, kAckBytes = 8;
constexpr int64_t kHandshakeUs = 3 * 1000000LL;

struct Conn {
  UniqueFd fd;
  std::string remote;
  bool outgoing = false;
  int peer = -1;  // outgoing: the rank dialed
  std::string in;
  size_t want = 0;
  Nonce nonce{};
  int64_t deadline_us = 0;
};

}  // namespace

Status BuildMesh(const RendezvousResult& table, const std::string& secret, UniqueFd listener,
                 int64_t timeout_us, TcpMesh* mesh) {
  const int me = mesh->rank(), size = mesh->size();
  const int64_t deadline = NowMicros() + timeout_us;
  auto where = [&](int q) {
    return HostPort(table.peers[q].addr, table.peers[q].port) + " on " + table.peers[q].hostname;
  };
  std::vector<bool> connected(size, false);
  connected[me] = true;
  int missing = size - 1, incoming_left = size - 1 - me;
  std::vector<std::unique_ptr<Conn>> conns;

  // Dial the lower ranks: their listeners are up (opened before they registered), and the
  // kernel completes a connect from the backlog, so this does not wait on their progress.
  for (int q = 0; q < me; ++q) {
    auto c = std::make_unique<Conn>();
    Status s = ConnectBy(table.peers[q].addr, table.peers[q].port, deadline, true, &c->fd, true);
    if (!s.ok())
      return Status::Internal("rank " + std::to_string(me) + " cannot connect to rank " +
                              std::to_string(q) + " at " + where(q) + ": " + s.message());
    c->outgoing = true;
    c->peer = q;
    c->remote = where(q);
    c->want = kHelloBytes;
    c->deadline_us = deadline;
    conns.push_back(std::move(c));
  }

  // A stray is no failure of the job: logged, closed, OK.
  auto refuse = [&](Conn& c, const std::string& why) {
    HVD_LOG(WARNING, "rank " << me << " refused a connection from " << c.remote << ": " << why);
    c.fd.reset();
    return Status();
  };
  // Handles a complete message on `c`; an error only for a failure of the job's own link.
  auto on_message = [&](Conn& c) -> Status {
    WireReader r(c.in);
    const uint32_t magic = r.U32();
    if (c.outgoing && c.want == kHelloBytes) {
      const uint32_t version = r.U32();
      r.Bytes(c.nonce.data(), c.nonce.size());
      if (magic != kMeshMagic || version != kTcpProtocolVersion)
        return Status::Internal("rank " + std::to_string(c.peer) + " at " + c.remote +
                                " answered with something other than a Horovod handshake");
      WireWriter w;
      w.U32(kMeshMagic);
      w.U32(kTcpProtocolVersion);
      w.U64(table.job_id);
      w.I32(me);
      const Sha256Digest proof = KeyProof(secret, c.nonce, me);
      w.Bytes(proof.data(), proof.size());
      Status s = WriteAllBy(c.fd.get(), w.data().data(), w.data().size(), deadline);
      if (!s.ok()) return s;
      c.in.clear();
      c.want = kAckBytes;
      return Status();
    }
    if (c.outgoing) {  // the ack
      if (magic != kMeshMagic || r.I32() != c.peer)
        return Status::Internal("rank " + std::to_string(c.peer) + " at " + c.remote +
                                " did not acknowledge the handshake");
      connected[c.peer] = true;
      --missing;
      mesh->SetPeer(c.peer, std::move(c.fd), c.remote);
      return Status();
    }
    const uint32_t version = r.U32();
    const uint64_t job = r.U64();
    const int rank = r.I32();
    Sha256Digest proof;
    r.Bytes(proof.data(), proof.size());
    if (magic != kMeshMagic) return refuse(c, "not a Horovod peer");
    if (version != kTcpProtocolVersion)
      return refuse(c, "protocol version " + std::to_string(version));
    if (job != table.job_id) return refuse(c, "a peer of another job");
    if (rank <= me || rank >= size)
      return refuse(c, "it claims rank " + std::to_string(rank) + ", which does not connect here");
    if (connected[rank])
      return refuse(c, "it claims rank " + std::to_string(rank) + ", already connected");
    if (!DigestsEqual(proof, KeyProof(secret, c.nonce, rank)))
      return refuse(c, "it claims rank " + std::to_string(rank) + " but failed authentication");
    WireWriter w;
    w.U32(kMeshMagic);
    w.I32(me);
    if (!WriteAllBy(c.fd.get(), w.data().data(), w.data().size(), deadline).ok())
      return refuse(c, "rank " + std::to_string(rank) + " left during the handshake");
    connected[rank] = true;
    --missing;
    --incoming_left;
    mesh->SetPeer(rank, std::move(c.fd), where(rank));
    return Status();
  };

  while (missing > 0) {
    const int64_t now = NowMicros();
    if (now >= deadline) {
      std::vector<int> absent;
      for (int q = 0; q < size; ++q)
        if (!connected[q]) absent.push_back(q);
      return Status::Internal("rank " + std::to_string(me) + " could not connect to " +
                              Ranks(absent) + " within " + SecondsString(timeout_us));
    }
    std::vector<pollfd> pfds;
    pfds.push_back({incoming_left > 0 ? listener.get() : -1, POLLIN, 0});
    int64_t wake = deadline;
    for (auto& c : conns) {
      pfds.push_back({c->fd.get(), POLLIN, 0});
      wake = std::min(wake, c->deadline_us);
    }
    poll(pfds.data(), pfds.size(),
         static_cast<int>(std::max<int64_t>(0, (wake - now + 999) / 1000)));
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = *conns[i];
      if (pfds[1 + i].revents) {
        while (c.fd.valid() && c.in.size() < c.want) {
          char buf[64];
          const ssize_t n = recv(c.fd.get(), buf, c.want - c.in.size(), MSG_DONTWAIT);
          if (n > 0) {
            c.in.append(buf, static_cast<size_t>(n));
            // A stray is told by its first word, without waiting for the rest.
            if (!c.outgoing && c.in.size() >= 4 && WireReader(c.in).U32() != kMeshMagic)
              refuse(c, "not a Horovod peer (it sent " + std::to_string(c.in.size()) +
                            " bytes of something else)");
            continue;
          }
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
          const std::string why = n == 0 ? "closed" : std::strerror(errno);
          if (c.outgoing)
            return Status::Internal("rank " + std::to_string(me) + " lost its connection to rank " +
                                    std::to_string(c.peer) + " at " + c.remote +
                                    " during the handshake: " + why);
          refuse(c, "it " + why + " before the handshake");
        }
        if (c.fd.valid() && c.in.size() == c.want) {
          Status s = on_message(c);
          if (!s.ok())
            return Status::Internal("rank " + std::to_string(me) + " cannot connect to rank " +
                                    std::to_string(c.peer) + ": " + s.message());
        }
      }
      if (c.fd.valid() && NowMicros() >= c.deadline_us && !c.outgoing)
        refuse(c, "no handshake within " + SecondsString(kHandshakeUs));
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const std::unique_ptr<Conn>& c) { return !c->fd.valid(); }),
                conns.end());
    if (pfds[0].revents) {
      std::string remote;
      int fd;
      while ((fd = AcceptNonBlocking(listener.get(), &remote)) >= 0) {
        auto c = std::make_unique<Conn>();
        c->fd.reset(fd);
        c->remote = remote;
        c->want = kProofBytes;
        c->deadline_us = std::min(NowMicros() + kHandshakeUs, deadline);
        TuneDataSocket(fd);
        RandomBytes(c->nonce.data(), c->nonce.size());
        WireWriter w;
        w.U32(kMeshMagic);
        w.U32(kTcpProtocolVersion);
        w.Bytes(c->nonce.data(), c->nonce.size());
        if (WriteAllBy(fd, w.data().data(), w.data().size(), c->deadline_us).ok())
          conns.push_back(std::move(c));
      }
    }
  }
  // Strays still mid-handshake and the listener close here: no port is left open.
  return Status();
}

}  // namespace hvd
