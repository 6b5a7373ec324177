// Socket plumbing of the TCP transport's setup; see socket_util.h.
#include "transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace hvd {
namespace {

std::string NumericHost(const sockaddr* sa, socklen_t len, int* port) {
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  if (port) *port = std::atoi(serv);
  return host;
}

// Milliseconds left until `deadline_us` for poll(), rounded up, at least 0.
int MillisLeft(int64_t deadline_us) {
  const int64_t left = deadline_us - NowMicros();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((left + 999) / 1000, 1 << 30));
}

Status Resolve(const std::string& host, int port, bool passive, addrinfo** res) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string serv = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), serv.c_str(), &hints, res);
  if (rc != 0)
    return Status::InvalidArgument("cannot resolve " + HostPort(host, port) + ": " +
                                   gai_strerror(rc));
  return Status();
}

void SleepMicros(int64_t us) {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return (host.empty() ? "0.0.0.0" : host) + ":" + std::to_string(port);
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  int port = 0;
  const std::string host = NumericHost(reinterpret_cast<sockaddr*>(&ss), len, &port);
  return HostPort(host, port);
}

bool LocalAddress(int fd, std::string* host, int* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  *host = NumericHost(reinterpret_cast<sockaddr*>(&ss), len, port);
  return *host != "?";
}

std::string LocalHostname() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == 0) return "localhost";
  return host;
}

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void TuneDataSocket(int fd) {
  int one = 1, buf = 4 << 20;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

Status Listen(const std::string& host, int port, const std::string& what, UniqueFd* out,
              int* bound_port) {
  addrinfo* res = nullptr;
  // "" binds every IPv4 interface (a dual-stack wildcard would need IPV6_V6ONLY care).
  Status s = Resolve(host.empty() ? "0.0.0.0" : host, port, true, &res);
  if (!s.ok()) return Status::InvalidArgument(what + ": " + s.message());
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), SOMAXCONN) != 0) {
      last = std::strerror(errno);
      continue;
    }
    SetNonBlocking(fd.get());
    std::string h;
    int p = port;
    LocalAddress(fd.get(), &h, &p);
    if (bound_port) *bound_port = p;
    *out = std::move(fd);
    freeaddrinfo(res);
    return Status();
  }
  freeaddrinfo(res);
  return Status::Internal(what + " cannot listen on " + HostPort(host, port) + ": " + last);
}

Status ConnectBy(const std::string& host, int port, int64_t deadline_us, bool retry_refused,
                 UniqueFd* out, bool tune) {
  std::string last = "timed out";
  do {
    addrinfo* res = nullptr;
    Status s = Resolve(host, port, false, &res);
    if (!s.ok()) return s;
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      UniqueFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) {
        last = std::strerror(errno);
        continue;
      }
      SetNonBlocking(fd.get());
      if (tune) TuneDataSocket(fd.get());
      int rc = connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        rc = poll(&p, 1, MillisLeft(deadline_us));
        if (rc == 0) {
          last = "timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      }
      if (rc == 0) {
        freeaddrinfo(res);
        *out = std::move(fd);
        return Status();
      }
      last = std::strerror(errno);
    }
    freeaddrinfo(res);
    if (!retry_refused || NowMicros() >= deadline_us) break;
    SleepMicros(std::min<int64_t>(100000, std::max<int64_t>(0, deadline_us - NowMicros())));
  } while (NowMicros() < deadline_us);
  return Status::Internal(last);
}

int AcceptNonBlocking(int listen_fd, std::string* remote) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  const int fd =
      accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return -1;
  int port = 0;
  const std::string host = NumericHost(reinterpret_cast<sockaddr*>(&ss), len, &port);
  if (remote) *remote = HostPort(host, port);
  return fd;
}

Status WriteAllBy(int fd, const void* data, size_t bytes, int64_t deadline_us) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Status::Internal(strerror(errno));
    pollfd pf{fd, POLLOUT, 0};
    if (poll(&pf, 1, MillisLeft(deadline_us)) == 0) return Status::Internal("timed out");
  }
  return Status();
}

Status ReadExactBy(int fd, void* data, size_t bytes, int64_t deadline_us) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status::Internal("connection closed by the other end");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Status::Internal(strerror(errno));
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, MillisLeft(deadline_us)) == 0) return Status::Internal("timed out");
  }
  return Status();
}

Status WriteFrameBy(int fd, const std::string& payload, int64_t deadline_us) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(payload.size()));
  w.Bytes(payload.data(), payload.size());
  return WriteAllBy(fd, w.data().data(), w.data().size(), deadline_us);
}

Status ReadFrameBy(int fd, size_t max_bytes, int64_t deadline_us, std::string* payload) {
  uint8_t len_bytes[4];
  Status s = ReadExactBy(fd, len_bytes, 4, deadline_us);
  if (!s.ok()) return s;
  const uint32_t len = WireReader(len_bytes, 4).U32();
  if (len > max_bytes)
    return Status::Internal("a frame of " + std::to_string(len) + " bytes, more than the " +
                            std::to_string(max_bytes) + " allowed");
  payload->resize(len);
  return ReadExactBy(fd, &(*payload)[0], len, deadline_us);
}

void RandomBytes(void* out, size_t bytes) {
  char* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = getrandom(p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (errno != EINTR) {
      // No entropy source: still unique per process (a nonce needs freshness, not secrecy).
      for (; bytes > 0; --bytes) *p++ = static_cast<char>(NowMicros() ^ getpid() ^ bytes);
    }
  }
}

Status InterfaceAddress(const std::string& iface, std::string* addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return Status::Internal(std::string("getifaddrs failed: ") + strerror(errno));
  std::string v4, v6;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || iface != i->ifa_name) continue;
    const int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    const socklen_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    const std::string h = NumericHost(i->ifa_addr, len, nullptr);
    if (fam == AF_INET && v4.empty()) v4 = h;
    if (fam == AF_INET6 && v6.empty() && h.find('%') == std::string::npos) v6 = h;
  }
  freeifaddrs(list);
  *addr = !v4.empty() ? v4 : v6;
  if (addr->empty())
    return Status::InvalidArgument("HOROVOD_GLOO_IFACE names interface '" + iface +
                                   "', which has no IP address on this host");
  return Status();
}

std::string SecondsString(int64_t us) {
  char buf[32];
  if (us % 1000000 == 0)
    std::snprintf(buf, sizeof(buf), "%lld s", static_cast<long long>(us / 1000000));
  else
    std::snprintf(buf, sizeof(buf), "%.3g s", us / 1e6);
  return buf;
}

void WireWriter::U32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

void WireWriter::U64(uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

bool WireReader::Bytes(void* out, size_t n) {
  if (!ok_ || n_ < n) {
    ok_ = false;
    std::memset(out, 0, n);
    return false;
  }
  std::memcpy(out, p_, n);
  p_ += n;
  n_ -= n;
  return true;
}

uint8_t WireReader::U8() {
  uint8_t v = 0;
  Bytes(&v, 1);
  return v;
}

uint32_t WireReader::U32() {
  uint8_t b[4];
  Bytes(b, 4);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

uint64_t WireReader::U64() {
  const uint64_t lo = U32();
  return lo | uint64_t(U32()) << 32;
}

std::string WireReader::Str(size_t max_len) {
  const uint32_t len = U32();
  if (!ok_ || len > max_len || len > n_) {
    ok_ = false;
    return "";
  }
  std::string s(p_, len);
  p_ += len;
  n_ -= len;
  return s;
}

}  // namespace hvd
