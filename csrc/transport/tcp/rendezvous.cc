// The rendezvous server and client of a TCP job; the protocol is in rendezvous.h.
#include "transport/tcp/rendezvous.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

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

void RendezvousServer::Serve() {
  std::vector<std::unique_ptr<Pending>> pending;
  std::vector<Slot> slots(size_);
  std::vector<bool> answered(size_, false);
  std::vector<std::string> notes;  // refused registrations, for the timeout's message
  std::string fatal;
  int present = 0, num_answered = 0;
  Status result;

  auto mark_answered = [&](int rank) {
    if (rank >= 0 && rank < size_ && !answered[rank]) {
      answered[rank] = true;
      ++num_answered;
    }
  };
  // A violation ends the job: every registered rank hears it now, later ones when they come.
  auto fail_all = [&](const std::string& why) {
    fatal = why;
    HVD_LOG(WARNING, "rendezvous failed: " << why);
    for (int r = 0; r < size_; ++r) {
      if (!slots[r].fd.valid()) continue;
      Answer(slots[r].fd.get(), ErrorAnswer(why));
      slots[r].fd.reset();
      mark_answered(r);
    }
  };
  auto refuse = [&](Pending& p, const std::string& why) {
    HVD_LOG(WARNING, "rendezvous: refused the connection from " << p.remote << ": " << why);
    p.fd.reset();
  };

  // A complete registration frame from `p`.
  auto on_registration = [&](Pending& p) {
    WireReader r(p.in.data() + 4, p.in.size() - 4);
    const uint32_t magic = r.U32(), version = r.U32();
    if (magic != kRendezvousMagic) return refuse(p, "not a Horovod rendezvous registration");
    if (version != kTcpProtocolVersion) {
      const std::string why = "protocol version " + std::to_string(version) +
                              ", the rendezvous server speaks " +
                              std::to_string(kTcpProtocolVersion) + " (mixed Horovod builds)";
      notes.push_back("a process at " + p.remote + " spoke " + why);
      Answer(p.fd.get(), ErrorAnswer(why));
      return refuse(p, why);
    }
    const int rank = r.I32(), size = r.I32();
    Sha256Digest proof;
    r.Bytes(proof.data(), proof.size());
    Slot s;
    s.info.hostname = r.Str();
    s.info.addr = r.Str();
    s.info.port = static_cast<int>(r.U32());
    s.size = size;
    if (!r.done()) return refuse(p, "a garbled registration");
    if (!DigestsEqual(proof, KeyProof(secret_, p.nonce, rank))) {
      notes.push_back("a process at " + p.remote + " (host " + s.info.hostname +
                      ") claiming rank " + std::to_string(rank) +
                      " failed authentication: its HOROVOD_SECRET_KEY differs");
      Answer(p.fd.get(),
             ErrorAnswer("authentication failed: the HOROVOD_SECRET_KEY of this "
                         "process (rank " +
                         std::to_string(rank) + ") differs from the rendezvous server's"));
      return refuse(p, "rank " + std::to_string(rank) + " failed authentication");
    }
    s.remote = p.remote;
    // A rank that listens on a wildcard is reached at the address it came from.
    if (s.info.addr.empty() || s.info.addr == "0.0.0.0" || s.info.addr == "::")
      s.info.addr = p.remote.substr(0, p.remote.rfind(':'));
    const std::string who = s.info.hostname + " (" + p.remote + ")";
    if (fatal.empty()) {
      if (size != size_) {
        int agree = -1;
        for (int q = 0; q < size_ && agree < 0; ++q)
          if (slots[q].fd.valid()) agree = q;
        fail_all("ranks disagree on the world size: " +
                 (agree >= 0 ? "rank " + std::to_string(agree) + " says "
                             : std::string("the rendezvous server expects ")) +
                 std::to_string(size_) + ", rank " + std::to_string(rank) + " says " +
                 std::to_string(size));
      } else if (rank < 0 || rank >= size_) {
        fail_all("rank " + std::to_string(rank) + " of " + who +
                 " is out of range for a world of size " + std::to_string(size_));
      } else if (slots[rank].fd.valid()) {
        fail_all("rank " + std::to_string(rank) + " was claimed by two processes (hosts " +
                 slots[rank].info.hostname + " (" + slots[rank].remote + ") and " + who + ")");
      } else {
        s.fd = std::move(p.fd);
        slots[rank] = std::move(s);
        ++present;
        return;
      }
    }
    Answer(p.fd.get(), ErrorAnswer(fatal));
    mark_answered(rank);
    p.fd.reset();
  };

  while (true) {
    const int64_t now = NowMicros();
    if (fatal.empty() && present == size_) {
      WireWriter w;
      uint64_t job_id = 0;
      RandomBytes(&job_id, sizeof(job_id));
      w.U8(0);
      w.U64(job_id);
      w.U32(static_cast<uint32_t>(size_));
      for (const Slot& s : slots) {
        w.Str(s.info.hostname);
        w.Str(s.info.addr);
        w.U32(static_cast<uint32_t>(s.info.port));
      }
      for (Slot& s : slots) {
        Answer(s.fd.get(), w.data());
        s.fd.reset();
      }
      break;
    }
    if (!fatal.empty() && num_answered == size_) {
      result = Status::Internal(fatal);
      break;
    }
    if (now >= deadline_us_) {
      if (!fatal.empty()) {
        result = Status::Internal(fatal);
        break;
      }
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r)
        if (!slots[r].fd.valid()) missing.push_back(r);
      if (missing.size() > 32) missing.resize(32);  // the first ones name the problem
      std::string why = "timed out after " + SecondsString(timeout_us_) + " with " +
                        std::to_string(present) + " of " + std::to_string(size_) +
                        " ranks registered; missing: " + Ranks(missing) +
                        (size_ - present > 32 ? " and more" : "");
      for (size_t i = 0; i < notes.size() && i < 4; ++i) why += "; " + notes[i];
      fail_all(why);
      result = Status::Internal(why);
      break;
    }

    std::vector<pollfd> pfds;
    pfds.push_back({wake_read_.get(), POLLIN, 0});
    pfds.push_back({listen_fd_.get(), POLLIN, 0});
    int64_t wake_at = deadline_us_;
    for (auto& p : pending) {
      pfds.push_back({p->fd.get(), POLLIN, 0});
      wake_at = std::min(wake_at, p->deadline_us);
    }
    std::vector<int> watched;  // registered ranks: their hang-up frees the slot
    for (int r = 0; r < size_; ++r)
      if (slots[r].fd.valid()) {
        pfds.push_back({slots[r].fd.get(), POLLIN, 0});
        watched.push_back(r);
      }
    const int wait_ms = static_cast<int>(std::max<int64_t>(0, (wake_at - now + 999) / 1000));
    if (poll(pfds.data(), pfds.size(), wait_ms) < 0) continue;
    if (pfds[0].revents) {
      result = Status::ShutDown("the rendezvous server was stopped");
      break;
    }
    // Registered ranks first (their indices in pfds come after the pending ones').
    for (size_t i = 0; i < watched.size(); ++i) {
      if (!pfds[2 + pending.size() + i].revents) continue;
      Slot& s = slots[watched[i]];
      // A registered rank sends nothing more: this is its hang-up (or garbage); either way
      // the slot is free again for a restarted process.
      HVD_LOG(WARNING, "rendezvous: rank " << watched[i] << " on " << s.info.hostname << " ("
                                           << s.remote << ") left before every rank registered");
      s.fd.reset();
      --present;
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = *pending[i];
      if (pfds[2 + i].revents) {
        // Read what completes the length word, then the frame; no more (the rest is garbage).
        while (p.fd.valid()) {
          size_t need = 4;
          if (p.in.size() >= 4) {
            const uint32_t len = WireReader(p.in.data(), 4).U32();
            if (len > kMaxRegistration) {
              refuse(p, "not a Horovod rendezvous registration (sent " +
                            std::to_string(p.in.size()) + " bytes of something else)");
              break;
            }
            need = 4 + len;
          }
          if (p.in.size() == need) {
            on_registration(p);
            p.fd.reset();  // registered (moved) or refused
            break;
          }
          char buf[4096];
          const ssize_t n = recv(p.fd.get(), buf, std::min(sizeof(buf), need - p.in.size()), 0);
          if (n > 0) {
            p.in.append(buf, static_cast<size_t>(n));
          } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            refuse(p, "closed before it registered");
          } else {
            break;
          }
        }
      }
      if (p.fd.valid() && NowMicros() >= p.deadline_us)
        refuse(p, "no registration within " + SecondsString(kHandshakeUs));
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const std::unique_ptr<Pending>& p) { return !p->fd.valid(); }),
                  pending.end());
    if (pfds[1].revents) {
      std::string remote;
      int fd;
      while ((fd = AcceptNonBlocking(listen_fd_.get(), &remote)) >= 0) {
        auto p = std::make_unique<Pending>();
        p->fd.reset(fd);
        p->remote = remote;
        RandomBytes(p->nonce.data(), p->nonce.size());
        p->deadline_us = std::min(NowMicros() + kHandshakeUs, deadline_us_);
        if (WriteFrameBy(fd, Hello(p->nonce), NowMicros() + kAnswerUs).ok())
          pending.push_back(std::move(p));
      }
    }
  }
  pending.clear();
  for (Slot& s : slots) s.fd.reset();
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
