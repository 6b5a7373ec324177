// The rendezvous server and client of a TCP job; the protocol is in rendezvous.h.
#include "transport/tcp/rendezvous.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"

namespace hvd {
namespace {

constexpr size_t kMaxRegistration = 64 << 10;    // a registration is ~100 bytes
constexpr int64_t kHandshakeUs = 5 * 1000000LL;  // for one connection to register
constexpr int64_t kAnswerUs = 2 * 1000000LL;     // to write one answer

std::string Hello(const Nonce& nonce) {
  WireWriter w;
  w.U32(kRendezvousMagic);
  w.U32(kTcpProtocolVersion);
  w.Bytes(nonce.data(), nonce.size());
  return w.data();
}

std::string ErrorAnswer(const std::string& why) {
  WireWriter w;
  w.U8(1);
  w.Str(why);
  return w.data();
}

}  // namespace

Sha256Digest KeyProof(const std::string& secret, const Nonce& nonce, int rank) {
  Sha256Digest d{};
  if (secret.empty()) return d;
  WireWriter w;
  w.Bytes(nonce.data(), nonce.size());
  w.U32(static_cast<uint32_t>(rank));
  return HmacSha256(secret, w.data().data(), w.data().size());
}

struct RendezvousServer::Pending {
  UniqueFd fd;
  std::string remote, in;
  Nonce nonce;
  int64_t deadline_us = 0;
};

struct RendezvousServer::Slot {
  UniqueFd fd;
  std::string remote;
  PeerInfo info;
  int size = 0;  // the world size it claimed
};

Status RendezvousServer::Start(const std::string& addr, int port, int size,
                               const std::string& secret, int64_t timeout_us) {
  if (thread_.joinable()) return Status::Internal("the rendezvous server is already running");
  if (size < 1)
    return Status::InvalidArgument("rendezvous for a world of size " + std::to_string(size));
  Status s = Listen(addr, port, "the rendezvous server", &listen_fd_, &port_);
  if (!s.ok()) return s;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::Internal("the rendezvous server cannot create its wake-up pipe");
  wake_read_.reset(fds[0]);
  wake_write_.reset(fds[1]);
  addr_ = addr;
  size_ = size;
  secret_ = secret;
  timeout_us_ = timeout_us;
  deadline_us_ = NowMicros() + timeout_us;
  result_ = Status();
  thread_ = std::thread([this] { Serve(); });
  return Status();
}

void RendezvousServer::Stop() {
  if (thread_.joinable()) {
    const char c = 1;
    if (write(wake_write_.get(), &c, 1) < 0) {}
    thread_.join();
  }
  listen_fd_.reset();
  wake_read_.reset();
  wake_write_.reset();
}

Status RendezvousServer::Wait() {
  if (thread_.joinable()) thread_.join();
  Stop();
  std::lock_guard<std::mutex> lock(mu_);
  return result_;
}

void RendezvousServer::Answer(int fd, const std::string& frame) {
  Status s = WriteFrameBy(fd, frame, NowMicros() + kAnswerUs);
  if (!s.ok())
    HVD_LOG(WARNING, "rendezvous: could not answer " << PeerAddress(fd) << ": " << s.message());
}

// One Serve() run: the connections still registering, the registered ranks, and the job's
// verdict so far; Run() is its poll() loop and returns the job's outcome.
class RendezvousServer::Session {
 public:
  explicit Session(RendezvousServer* server)
      : server_(*server), size_(server->size_), slots_(size_), answered_(size_, false) {}

  Status Run() {
    while (true) {
      const int64_t now = NowMicros();
      if (fatal_.empty() && present_ == size_) {
        AnswerTable();
        return Status();
      }
      if (!fatal_.empty() && num_answered_ == size_) return Status::Internal(fatal_);
      if (now >= server_.deadline_us_) return TimedOut();
      std::vector<pollfd> pfds;
      std::vector<int> watched;  // registered ranks: their hang-up frees the slot
      if (!PollAll(now, &pfds, &watched)) continue;
      if (pfds[0].revents) return Status::ShutDown("the rendezvous server was stopped");
      ServeRegistered(pfds, watched);
      ServePending(pfds);
      if (pfds[1].revents) AcceptNew();
    }
  }

 private:
  // Every rank registered: each hears the whole table.
  void AnswerTable() {
    WireWriter w;
    uint64_t job_id = 0;
    RandomBytes(&job_id, sizeof(job_id));
    w.U8(0);
    w.U64(job_id);
    w.U32(static_cast<uint32_t>(size_));
    for (const Slot& s : slots_) {
      w.Str(s.info.hostname);
      w.Str(s.info.addr);
      w.U32(static_cast<uint32_t>(s.info.port));
    }
    for (Slot& s : slots_) {
      server_.Answer(s.fd.get(), w.data());
      s.fd.reset();
    }
  }

  // The deadline passed: the verdict if there is one, else the missing ranks, named.
  Status TimedOut() {
    if (!fatal_.empty()) return Status::Internal(fatal_);
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (!slots_[r].fd.valid()) missing.push_back(r);
    if (missing.size() > 32) missing.resize(32);  // the first ones name the problem
    std::string why = "timed out after " + SecondsString(server_.timeout_us_) + " with " +
                      std::to_string(present_) + " of " + std::to_string(size_) +
                      " ranks registered; missing: " + Ranks(missing) +
                      (size_ - present_ > 32 ? " and more" : "");
    for (size_t i = 0; i < notes_.size() && i < 4; ++i) why += "; " + notes_[i];
    FailAll(why);
    return Status::Internal(why);
  }

  // Waits for the wake-up pipe (pfds[0]), the listener (pfds[1]), the pending connections
  // (pfds[2 + i]) and the registered ranks (after those, in `watched` order) until the nearest
  // deadline. False if poll() failed (a signal): the loop goes round again.
  bool PollAll(int64_t now, std::vector<pollfd>* pfds, std::vector<int>* watched) {
    pfds->push_back({server_.wake_read_.get(), POLLIN, 0});
    pfds->push_back({server_.listen_fd_.get(), POLLIN, 0});
    int64_t wake_at = server_.deadline_us_;
    for (auto& p : pending_) {
      pfds->push_back({p->fd.get(), POLLIN, 0});
      wake_at = std::min(wake_at, p->deadline_us);
    }
    for (int r = 0; r < size_; ++r)
      if (slots_[r].fd.valid()) {
        pfds->push_back({slots_[r].fd.get(), POLLIN, 0});
        watched->push_back(r);
      }
    const int wait_ms = static_cast<int>(std::max<int64_t>(0, (wake_at - now + 999) / 1000));
    return poll(pfds->data(), pfds->size(), wait_ms) >= 0;
  }

  // Registered ranks first (their indices in pfds come after the pending ones').
  void ServeRegistered(const std::vector<pollfd>& pfds, const std::vector<int>& watched) {
    for (size_t i = 0; i < watched.size(); ++i) {
      if (!pfds[2 + pending_.size() + i].revents) continue;
      Slot& s = slots_[watched[i]];
      // A registered rank sends nothing more: this is its hang-up (or garbage); either way
      // the slot is free again for a restarted process.
      HVD_LOG(WARNING, "rendezvous: rank " << watched[i] << " on " << s.info.hostname << " ("
                                           << s.remote << ") left before every rank registered");
      s.fd.reset();
      --present_;
    }
  }

  void ServePending(const std::vector<pollfd>& pfds) {
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      if (pfds[2 + i].revents) ReadPending(p);
      if (p.fd.valid() && NowMicros() >= p.deadline_us)
        Refuse(p, "no registration within " + SecondsString(kHandshakeUs));
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const std::unique_ptr<Pending>& p) { return !p->fd.valid(); }),
                   pending_.end());
  }

  // Read what completes the length word, then the frame; no more (the rest is garbage).
  void ReadPending(Pending& p) {
    while (p.fd.valid()) {
      size_t need = 4;
      if (p.in.size() >= 4) {
        const uint32_t len = WireReader(p.in.data(), 4).U32();
        if (len > kMaxRegistration) {
          Refuse(p, "not a Horovod rendezvous registration (sent " + std::to_string(p.in.size()) +
                        " bytes of something else)");
          break;
        }
        need = 4 + len;
      }
      if (p.in.size() == need) {
        OnRegistration(p);
        p.fd.reset();  // registered (moved) or refused
        break;
      }
      char buf[4096];
      const ssize_t n = recv(p.fd.get(), buf, std::min(sizeof(buf), need - p.in.size()), 0);
      if (n > 0) {
        p.in.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        Refuse(p, "closed before it registered");
      } else {
        break;
      }
    }
  }

  // Takes every waiting connection and sends it the hello.
  void AcceptNew() {
    std::string remote;
    int fd;
    while ((fd = AcceptNonBlocking(server_.listen_fd_.get(), &remote)) >= 0) {
      auto p = std::make_unique<Pending>();
      p->fd.reset(fd);
      p->remote = remote;
      RandomBytes(p->nonce.data(), p->nonce.size());
      p->deadline_us = std::min(NowMicros() + kHandshakeUs, server_.deadline_us_);
      if (WriteFrameBy(fd, Hello(p->nonce), NowMicros() + kAnswerUs).ok())
        pending_.push_back(std::move(p));
    }
  }

  void MarkAnswered(int rank) {
    if (rank >= 0 && rank < size_ && !answered_[rank]) {
      answered_[rank] = true;
      ++num_answered_;
    }
  }

  // A violation ends the job: every registered rank hears it now, later ones when they come.
  void FailAll(const std::string& why) {
    fatal_ = why;
    HVD_LOG(WARNING, "rendezvous failed: " << why);
    for (int r = 0; r < size_; ++r) {
      if (!slots_[r].fd.valid()) continue;
      server_.Answer(slots_[r].fd.get(), ErrorAnswer(why));
      slots_[r].fd.reset();
      MarkAnswered(r);
    }
  }

  void Refuse(Pending& p, const std::string& why) {
    HVD_LOG(WARNING, "rendezvous: refused the connection from " << p.remote << ": " << why);
    p.fd.reset();
  }

  // A complete registration frame from `p`: read and authenticated, then admitted.
  void OnRegistration(Pending& p) {
    WireReader r(p.in.data() + 4, p.in.size() - 4);
    const uint32_t magic = r.U32(), version = r.U32();
    if (magic != kRendezvousMagic) return Refuse(p, "not a Horovod rendezvous registration");
    if (version != kTcpProtocolVersion) {
      const std::string why = "protocol version " + std::to_string(version) +
                              ", the rendezvous server speaks " +
                              std::to_string(kTcpProtocolVersion) + " (mixed Horovod builds)";
      notes_.push_back("a process at " + p.remote + " spoke " + why);
      server_.Answer(p.fd.get(), ErrorAnswer(why));
      return Refuse(p, why);
    }
    const int rank = r.I32(), claimed_size = r.I32();
    Sha256Digest proof;
    r.Bytes(proof.data(), proof.size());
    Slot s;
    s.info.hostname = r.Str();
    s.info.addr = r.Str();
    s.info.port = static_cast<int>(r.U32());
    s.size = claimed_size;
    if (!r.done()) return Refuse(p, "a garbled registration");
    if (!DigestsEqual(proof, KeyProof(server_.secret_, p.nonce, rank))) {
      notes_.push_back("a process at " + p.remote + " (host " + s.info.hostname +
                       ") claiming rank " + std::to_string(rank) +
                       " failed authentication: its HOROVOD_SECRET_KEY differs");
      server_.Answer(p.fd.get(),
                     ErrorAnswer("authentication failed: the HOROVOD_SECRET_KEY of this "
                                 "process (rank " +
                                 std::to_string(rank) + ") differs from the rendezvous server's"));
      return Refuse(p, "rank " + std::to_string(rank) + " failed authentication");
    }
    s.remote = p.remote;
    // A rank that listens on a wildcard is reached at the address it came from.
    if (s.info.addr.empty() || s.info.addr == "0.0.0.0" || s.info.addr == "::")
      s.info.addr = p.remote.substr(0, p.remote.rfind(':'));
    Admit(p, rank, std::move(s));
  }

  // An authenticated registration takes its rank's slot, or fails the job (sizes disagree, the
  // rank is out of range or taken); after a failure every later one hears the verdict.
  void Admit(Pending& p, int rank, Slot s) {
    const std::string who = s.info.hostname + " (" + p.remote + ")";
    if (fatal_.empty()) {
      if (s.size != size_) {
        int agree = -1;
        for (int q = 0; q < size_ && agree < 0; ++q)
          if (slots_[q].fd.valid()) agree = q;
        FailAll("ranks disagree on the world size: " +
                (agree >= 0 ? "rank " + std::to_string(agree) + " says "
                            : std::string("the rendezvous server expects ")) +
                std::to_string(size_) + ", rank " + std::to_string(rank) + " says " +
                std::to_string(s.size));
      } else if (rank < 0 || rank >= size_) {
        FailAll("rank " + std::to_string(rank) + " of " + who +
                " is out of range for a world of size " + std::to_string(size_));
      } else if (slots_[rank].fd.valid()) {
        FailAll("rank " + std::to_string(rank) + " was claimed by two processes (hosts " +
                slots_[rank].info.hostname + " (" + slots_[rank].remote + ") and " + who + ")");
      } else {
        s.fd = std::move(p.fd);
        slots_[rank] = std::move(s);
        ++present_;
        return;
      }
    }
    server_.Answer(p.fd.get(), ErrorAnswer(fatal_));
    MarkAnswered(rank);
    p.fd.reset();
  }

  RendezvousServer& server_;
  const int size_;
  std::vector<Slot> slots_;  // index = rank; valid fd: registered and waiting for the table
  std::vector<bool> answered_;
  std::vector<std::unique_ptr<Pending>> pending_;  // connected, not yet registered
  std::vector<std::string> notes_;  // refused registrations, for the timeout's message
  std::string fatal_;               // the violation that ended the job
  int present_ = 0, num_answered_ = 0;
};

void RendezvousServer::Serve() {
  Status result;
  {
    Session session(this);
    result = session.Run();
  }  // pending connections and registered ranks close here
  listen_fd_.reset();  // the port is free as soon as the job has formed
  std::lock_guard<std::mutex> lock(mu_);
  result_ = result;
}

Status RendezvousClient::Connect(const std::string& addr, int port, int64_t timeout_us) {
  start_us_ = NowMicros();
  timeout_us_ = timeout_us;
  server_ = HostPort(addr, port);
  Status s = ConnectBy(addr, port, start_us_ + timeout_us, true, &fd_);
  if (!s.ok())
    return Status::Internal("cannot reach the rendezvous server at " + server_ + " within " +
                            SecondsString(timeout_us) + ": " + s.message());
  int local_port = 0;
  LocalAddress(fd_.get(), &local_host_, &local_port);
  return Status();
}

Status RendezvousClient::Register(int rank, int size, const std::string& secret, const PeerInfo& me,
                                  RendezvousResult* out) {
  // The server answers when the last rank arrives, at most its timeout after it started; a
  // little grace covers the server starting after this rank.
  const int64_t deadline = start_us_ + timeout_us_ + std::min<int64_t>(timeout_us_, 5 * 1000000LL);
  const std::string at = "the rendezvous server at " + server_;
  std::string hello;
  Status s = ReadFrameBy(fd_.get(), 1024, deadline, &hello);
  if (!s.ok()) return Status::Internal(at + " did not greet this process: " + s.message());
  WireReader h(hello);
  const uint32_t magic = h.U32(), version = h.U32();
  Nonce nonce;
  h.Bytes(nonce.data(), nonce.size());
  if (magic != kRendezvousMagic || !h.done())
    return Status::Internal(server_ + " is not a Horovod rendezvous server");
  if (version != kTcpProtocolVersion)
    return Status::Internal(at + " speaks protocol version " + std::to_string(version) +
                            ", this process " + std::to_string(kTcpProtocolVersion) +
                            " (mixed Horovod builds)");
  WireWriter w;
  w.U32(kRendezvousMagic);
  w.U32(kTcpProtocolVersion);
  w.I32(rank);
  w.I32(size);
  const Sha256Digest proof = KeyProof(secret, nonce, rank);
  w.Bytes(proof.data(), proof.size());
  w.Str(me.hostname);
  w.Str(me.addr);
  w.U32(static_cast<uint32_t>(me.port));
  s = WriteFrameBy(fd_.get(), w.data(), deadline);
  if (!s.ok()) return Status::Internal("cannot register with " + at + ": " + s.message());
  std::string answer;
  s = ReadFrameBy(fd_.get(), size_t(1) << 30, deadline, &answer);
  fd_.reset();
  if (!s.ok())
    return Status::Internal(
        at + (s.message() == "timed out"
                  ? " did not answer within " + SecondsString(deadline - start_us_) +
                        " (it answers once all " + std::to_string(size) + " ranks have registered)"
                  : " dropped this process (rank " + std::to_string(rank) +
                        ") without an answer: " + s.message() +
                        " (the server ends once every rank has registered: was this rank "
                        "started twice?)"));
  WireReader r(answer);
  if (r.U8() != 0) {
    const std::string why = r.Str(1 << 20);
    return Status::Internal("rendezvous at " + server_ + " failed: " + why);
  }
  out->job_id = r.U64();
  const uint32_t n = r.U32();
  if (!r.ok() || n != static_cast<uint32_t>(size))
    return Status::Internal(at + " sent a table of " + std::to_string(n) + " ranks, not " +
                            std::to_string(size));
  out->peers.resize(n);
  for (PeerInfo& p : out->peers) {
    p.hostname = r.Str();
    p.addr = r.Str();
    p.port = static_cast<int>(r.U32());
  }
  if (!r.done()) return Status::Internal(at + " sent a garbled table");
  return Status();
}

}  // namespace hvd
