// The full mesh's connections and handshakes; the protocol is in mesh_setup.h.
#include "transport/tcp/mesh_setup.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
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

// One BuildMesh call: the state its steps share. Dials the lower ranks, then runs one poll()
// loop over the listener and every connection still mid-handshake until each peer is connected.
class MeshBuilder {
 public:
  MeshBuilder(const RendezvousResult& table, const std::string& secret, UniqueFd listener,
              int64_t timeout_us, TcpMesh* mesh)
      : table_(table),
        secret_(secret),
        listener_(std::move(listener)),
        timeout_us_(timeout_us),
        mesh_(mesh),
        me_(mesh->rank()),
        size_(mesh->size()),
        deadline_(NowMicros() + timeout_us),
        connected_(size_, false),
        missing_(size_ - 1),
        incoming_left_(size_ - 1 - me_) {
    connected_[me_] = true;
  }

  Status Run() {
    Status s = DialLowerRanks();
    if (!s.ok()) return s;
    while (missing_ > 0) {
      const int64_t now = NowMicros();
      if (now >= deadline_) return NotConnectedInTime();
      const std::vector<pollfd> pfds = PollAll(now);
      s = ServeConnections(pfds);
      if (!s.ok()) return s;
      conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                                  [](const std::unique_ptr<Conn>& c) { return !c->fd.valid(); }),
                   conns_.end());
      if (pfds[0].revents) AcceptNew();
    }
    // Strays still mid-handshake and the listener close with the builder: no port is left open.
    return Status();
  }

 private:
  std::string Where(int q) const {
    return HostPort(table_.peers[q].addr, table_.peers[q].port) + " on " + table_.peers[q].hostname;
  }

  // Dial the lower ranks: their listeners are up (opened before they registered), and the
  // kernel completes a connect from the backlog, so this does not wait on their progress.
  Status DialLowerRanks() {
    for (int q = 0; q < me_; ++q) {
      auto c = std::make_unique<Conn>();
      Status s =
          ConnectBy(table_.peers[q].addr, table_.peers[q].port, deadline_, true, &c->fd, true);
      if (!s.ok())
        return Status::Internal("rank " + std::to_string(me_) + " cannot connect to rank " +
                                std::to_string(q) + " at " + Where(q) + ": " + s.message());
      c->outgoing = true;
      c->peer = q;
      c->remote = Where(q);
      c->want = kHelloBytes;
      c->deadline_us = deadline_;
      conns_.push_back(std::move(c));
    }
    return Status();
  }

  Status NotConnectedInTime() const {
    std::vector<int> absent;
    for (int q = 0; q < size_; ++q)
      if (!connected_[q]) absent.push_back(q);
    return Status::Internal("rank " + std::to_string(me_) + " could not connect to " +
                            Ranks(absent) + " within " + SecondsString(timeout_us_));
  }

  // Waits for the listener (while higher ranks are still to come) and every connection, until
  // the nearest deadline. pfds[0] is the listener, pfds[1 + i] conns_[i].
  std::vector<pollfd> PollAll(int64_t now) {
    std::vector<pollfd> pfds;
    pfds.push_back({incoming_left_ > 0 ? listener_.get() : -1, POLLIN, 0});
    int64_t wake = deadline_;
    for (auto& c : conns_) {
      pfds.push_back({c->fd.get(), POLLIN, 0});
      wake = std::min(wake, c->deadline_us);
    }
    poll(pfds.data(), pfds.size(),
         static_cast<int>(std::max<int64_t>(0, (wake - now + 999) / 1000)));
    return pfds;
  }

  Status ServeConnections(const std::vector<pollfd>& pfds) {
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = *conns_[i];
      if (pfds[1 + i].revents) {
        Status s = ReadConn(c);
        if (!s.ok()) return s;
        if (c.fd.valid() && c.in.size() == c.want) {
          s = OnMessage(c);
          if (!s.ok())
            return Status::Internal("rank " + std::to_string(me_) + " cannot connect to rank " +
                                    std::to_string(c.peer) + ": " + s.message());
        }
      }
      if (c.fd.valid() && NowMicros() >= c.deadline_us && !c.outgoing)
        Refuse(c, "no handshake within " + SecondsString(kHandshakeUs));
    }
    return Status();
  }

  // Reads what `c` has of its message, no more; an error only when an outgoing link is lost.
  Status ReadConn(Conn& c) {
    while (c.fd.valid() && c.in.size() < c.want) {
      char buf[64];
      const ssize_t n = recv(c.fd.get(), buf, c.want - c.in.size(), MSG_DONTWAIT);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        // A stray is told by its first word, without waiting for the rest.
        if (!c.outgoing && c.in.size() >= 4 && WireReader(c.in).U32() != kMeshMagic)
          Refuse(c, "not a Horovod peer (it sent " + std::to_string(c.in.size()) +
                        " bytes of something else)");
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      const std::string why = n == 0 ? "closed" : std::strerror(errno);
      if (c.outgoing)
        return Status::Internal("rank " + std::to_string(me_) + " lost its connection to rank " +
                                std::to_string(c.peer) + " at " + c.remote +
                                " during the handshake: " + why);
      Refuse(c, "it " + why + " before the handshake");
    }
    return Status();
  }

  // Takes every waiting connection of a higher rank and sends it the hello.
  void AcceptNew() {
    std::string remote;
    int fd;
    while ((fd = AcceptNonBlocking(listener_.get(), &remote)) >= 0) {
      auto c = std::make_unique<Conn>();
      c->fd.reset(fd);
      c->remote = remote;
      c->want = kProofBytes;
      c->deadline_us = std::min(NowMicros() + kHandshakeUs, deadline_);
      TuneDataSocket(fd);
      RandomBytes(c->nonce.data(), c->nonce.size());
      WireWriter w;
      w.U32(kMeshMagic);
      w.U32(kTcpProtocolVersion);
      w.Bytes(c->nonce.data(), c->nonce.size());
      if (WriteAllBy(fd, w.data().data(), w.data().size(), c->deadline_us).ok())
        conns_.push_back(std::move(c));
    }
  }

  // A stray is no failure of the job: logged, closed, OK.
  Status Refuse(Conn& c, const std::string& why) {
    HVD_LOG(WARNING, "rank " << me_ << " refused a connection from " << c.remote << ": " << why);
    c.fd.reset();
    return Status();
  }

  // Handles a complete message on `c`; an error only for a failure of the job's own link.
  Status OnMessage(Conn& c) {
    WireReader r(c.in);
    const uint32_t magic = r.U32();
    if (c.outgoing && c.want == kHelloBytes) return OnHello(c, magic, r);
    if (c.outgoing) return OnAck(c, magic, r);
    return OnProof(c, magic, r);
  }

  // The connector's side: the acceptor's hello, answered with this rank's proof.
  Status OnHello(Conn& c, uint32_t magic, WireReader& r) {
    const uint32_t version = r.U32();
    r.Bytes(c.nonce.data(), c.nonce.size());
    if (magic != kMeshMagic || version != kTcpProtocolVersion)
      return Status::Internal("rank " + std::to_string(c.peer) + " at " + c.remote +
                              " answered with something other than a Horovod handshake");
    WireWriter w;
    w.U32(kMeshMagic);
    w.U32(kTcpProtocolVersion);
    w.U64(table_.job_id);
    w.I32(me_);
    const Sha256Digest proof = KeyProof(secret_, c.nonce, me_);
    w.Bytes(proof.data(), proof.size());
    Status s = WriteAllBy(c.fd.get(), w.data().data(), w.data().size(), deadline_);
    if (!s.ok()) return s;
    c.in.clear();
    c.want = kAckBytes;
    return Status();
  }

  // The connector's side: the acceptor's ack, which completes the link.
  Status OnAck(Conn& c, uint32_t magic, WireReader& r) {
    if (magic != kMeshMagic || r.I32() != c.peer)
      return Status::Internal("rank " + std::to_string(c.peer) + " at " + c.remote +
                              " did not acknowledge the handshake");
    connected_[c.peer] = true;
    --missing_;
    mesh_->SetPeer(c.peer, std::move(c.fd), c.remote);
    return Status();
  }

  // The acceptor's side: a higher rank's proof, checked and acknowledged.
  Status OnProof(Conn& c, uint32_t magic, WireReader& r) {
    const uint32_t version = r.U32();
    const uint64_t job = r.U64();
    const int rank = r.I32();
    Sha256Digest proof;
    r.Bytes(proof.data(), proof.size());
    if (magic != kMeshMagic) return Refuse(c, "not a Horovod peer");
    if (version != kTcpProtocolVersion)
      return Refuse(c, "protocol version " + std::to_string(version));
    if (job != table_.job_id) return Refuse(c, "a peer of another job");
    if (rank <= me_ || rank >= size_)
      return Refuse(c, "it claims rank " + std::to_string(rank) + ", which does not connect here");
    if (connected_[rank])
      return Refuse(c, "it claims rank " + std::to_string(rank) + ", already connected");
    if (!DigestsEqual(proof, KeyProof(secret_, c.nonce, rank)))
      return Refuse(c, "it claims rank " + std::to_string(rank) + " but failed authentication");
    WireWriter w;
    w.U32(kMeshMagic);
    w.I32(me_);
    if (!WriteAllBy(c.fd.get(), w.data().data(), w.data().size(), deadline_).ok())
      return Refuse(c, "rank " + std::to_string(rank) + " left during the handshake");
    connected_[rank] = true;
    --missing_;
    --incoming_left_;
    mesh_->SetPeer(rank, std::move(c.fd), Where(rank));
    return Status();
  }

  const RendezvousResult& table_;
  const std::string& secret_;
  UniqueFd listener_;
  const int64_t timeout_us_;
  TcpMesh* const mesh_;
  const int me_, size_;
  const int64_t deadline_;
  std::vector<bool> connected_;
  int missing_, incoming_left_;
  std::vector<std::unique_ptr<Conn>> conns_;
};

}  // namespace

Status BuildMesh(const RendezvousResult& table, const std::string& secret, UniqueFd listener,
                 int64_t timeout_us, TcpMesh* mesh) {
  return MeshBuilder(table, secret, std::move(listener), timeout_us, mesh).Run();
}

}  // namespace hvd
