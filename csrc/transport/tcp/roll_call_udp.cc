// The roll call's UDP channel; the protocol and its checks are in roll_call_udp.h.
#include "transport/tcp/roll_call_udp.h"

#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "transport/tcp/hmac_sha256.h"

namespace hvd {
namespace {

constexpr size_t kSignedBytes = kNoteBytes - 16;

bool ResolveDatagram(const std::string& host, int port, sockaddr_storage* out, socklen_t* len,
                     std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res) {
    *error = "cannot resolve " + HostPort(host, port) + ": " + gai_strerror(rc);
    return false;
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

// Same family, address and port (what recvfrom reports of a sender against the table's).
bool SameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
  }
  return false;
}

}  // namespace

std::string EncodeNote(const std::string& secret, uint64_t job_id, int from, int to,
                       uint64_t counter, int64_t word) {
  WireWriter w;
  w.U32(kNoteMagic);
  w.U64(job_id);
  w.I32(from);
  w.I32(to);
  w.U64(counter);
  w.U64(static_cast<uint64_t>(word));
  const Sha256Digest mac = HmacSha256(secret, w.data().data(), w.data().size());
  w.Bytes(mac.data(), 16);
  return w.data();
}

bool UdpRollCall::Bind(const std::string& addr, int port, std::string* error) {
  sockaddr_storage sa{};
  socklen_t len = 0;
  if (!ResolveDatagram(addr, port, &sa, &len, error)) return false;
  UniqueFd fd(socket(sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    *error = "cannot bind UDP " + HostPort(addr, port) + ": " + std::strerror(errno);
    return false;
  }
  // Room for every peer's hello (and a burst of notes) before the first poll; the kernel caps
  // it at net.core.rmem_max.
  const int rcvbuf = 1 << 20;
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  if (port == 0) {  // tests: the port the kernel chose
    socklen_t got = sizeof(sa);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &got);
    port = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(sa).sin6_port
                                          : reinterpret_cast<sockaddr_in&>(sa).sin_port);
  }
  std::lock_guard<std::mutex> lk(mu_);
  fd_ = std::move(fd);
  port_ = port;
  return true;
}

bool UdpRollCall::Start(const RendezvousResult& table, int rank, const std::string& secret,
                        std::string* error) {
  std::lock_guard<std::mutex> lk(mu_);
  rank_ = rank;
  job_id_ = table.job_id;
  secret_ = secret;
  peers_.assign(table.peers.size(), Peer{});
  for (size_t q = 0; q < table.peers.size(); ++q) {
    Peer& p = peers_[q];
    if (!ResolveDatagram(table.peers[q].addr, table.peers[q].port, &p.addr, &p.len, error)) {
      *error = "rank " + std::to_string(q) + "'s address: " + *error;
      return false;
    }
  }
  SendLocked(-1, kHelloWord);
  return true;
}

std::vector<int> UdpRollCall::AwaitHellos(int64_t timeout_us) {
  const int64_t deadline = NowMicros() + timeout_us;
  int64_t next_hello = NowMicros() + 50000;
  std::vector<int> missing;
  while (true) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ReadLocked();
      missing.clear();
      for (int q = 0; q < static_cast<int>(peers_.size()); ++q)
        if (q != rank_ && !peers_[q].greeted) missing.push_back(q);
      const int64_t now = NowMicros();
      if (missing.empty() || now >= deadline) return missing;
      // A peer may have missed ours (a datagram lost) and still be waiting: greet again.
      if (now >= next_hello) {
        SendLocked(-1, kHelloWord);
        next_hello = now + 50000;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void UdpRollCall::SendLocked(int to, int64_t word) {
  if (!fd_.valid()) return;
  for (int q = 0; q < static_cast<int>(peers_.size()); ++q) {
    if (q == rank_ || (to >= 0 && q != to)) continue;
    const std::string note = EncodeNote(secret_, job_id_, rank_, q, next_counter_++, word);
    // Best effort, never blocking: a full buffer or an unreachable peer loses this note, which
    // the watchdog survives (the peer then looks silent, or a blocked rank asks again).
    (void)sendto(fd_.get(), note.data(), note.size(), MSG_DONTWAIT,
                 reinterpret_cast<const sockaddr*>(&peers_[q].addr), peers_[q].len);
  }
}

void UdpRollCall::Send(int to, int64_t word) {
  std::lock_guard<std::mutex> lk(mu_);
  SendLocked(to, word);
}

bool UdpRollCall::Accept(const char* buf, size_t n, const sockaddr_storage& src,
                         socklen_t src_len) {
  WireReader r(buf, n);
  const uint32_t magic = r.U32();
  const uint64_t job = r.U64();
  const int from = r.I32(), to = r.I32();
  const uint64_t counter = r.U64();
  const int64_t word = static_cast<int64_t>(r.U64());
  if (n != kNoteBytes || magic != kNoteMagic || job != job_id_ || to != rank_ || from < 0 ||
      from >= static_cast<int>(peers_.size()) || from == rank_) {
    ++drops_.malformed;
    return false;
  }
  Peer& p = peers_[from];
  if (!SameEndpoint(src, p.addr)) {
    ++drops_.bad_source;
    return false;
  }
  const Sha256Digest mac = HmacSha256(secret_, buf, kSignedBytes);
  uint8_t diff = 0;  // in constant time, as DigestsEqual
  for (size_t i = 0; i < 16; ++i) diff |= mac[i] ^ static_cast<uint8_t>(buf[kSignedBytes + i]);
  if (diff != 0) {
    ++drops_.bad_mac;
    return false;
  }
  // The replay window: counters above the highest seen move it; those within 64 below it
  // are taken once each; older ones cannot be told from replays and are dropped.
  if (counter > p.top) {
    const uint64_t shift = counter - p.top;
    p.window = shift >= 64 ? 1 : (p.window << shift) | 1;
    p.top = counter;
  } else {
    const uint64_t back = p.top - counter;
    if (counter == 0 || back >= 64 || (p.window >> back) & 1) {
      ++drops_.replayed;
      return false;
    }
    p.window |= uint64_t(1) << back;
  }
  if (word == kHelloWord)
    p.greeted = true;
  else if (word >= 0)
    inbox_.emplace_back(from, word);
  return true;
}

void UdpRollCall::ReadLocked() {
  if (!fd_.valid()) return;
  // Bounded, so a flood cannot hold the watchdog's thread: the rest waits for the next poll.
  for (int i = 0; i < 4096; ++i) {
    char buf[kNoteBytes + 1];
    sockaddr_storage src{};
    socklen_t src_len = sizeof(src);
    const ssize_t n = recvfrom(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&src), &src_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: nothing more (or an error the next poll will meet again)
    }
    Accept(buf, static_cast<size_t>(n), src, src_len);
  }
}

void UdpRollCall::Poll(std::vector<std::pair<int, int64_t>>* notes) {
  std::lock_guard<std::mutex> lk(mu_);
  ReadLocked();
  notes->insert(notes->end(), inbox_.begin(), inbox_.end());
  inbox_.clear();
}

void UdpRollCall::Close() {
  std::lock_guard<std::mutex> lk(mu_);
  fd_.reset();
}

UdpRollCall::Drops UdpRollCall::drops() {
  std::lock_guard<std::mutex> lk(mu_);
  return drops_;
}

int UdpRollCall::port() {
  std::lock_guard<std::mutex> lk(mu_);
  return port_;
}

void UdpRollCall::set_next_counter_for_test(uint64_t c) {
  std::lock_guard<std::mutex> lk(mu_);
  next_counter_ = c;
}

}  // namespace hvd
