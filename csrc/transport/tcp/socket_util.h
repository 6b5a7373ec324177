// Socket plumbing of the TCP transport: an owning fd, name resolution, listeners, connects and
// reads/writes bounded by a deadline (nonblocking sockets + poll()), and the little-endian wire
// encoding of the setup messages (rendezvous and mesh handshakes). Setup only: the data path
// (tcp_comm.cc) drives its sockets itself. IPv4 and IPv6; deadlines are NowMicros() values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"

namespace hvd {

// Owns one file descriptor; closes it when reset or destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "host:port", with brackets around an IPv6 host.
std::string HostPort(const std::string& host, int port);
// The numeric address and port of a socket's remote end (PeerAddress) or its own (LocalAddress).
std::string PeerAddress(int fd);
bool LocalAddress(int fd, std::string* host, int* port);
std::string LocalHostname();  // gethostname(), "localhost" if it fails

// A listener on host:port (host "" = every IPv4 interface, port 0 = an ephemeral one), with
// SO_REUSEADDR, nonblocking. `what` names it in errors ("the rendezvous server").
Status Listen(const std::string& host, int port, const std::string& what, UniqueFd* out,
              int* bound_port);
// Connects to host:port by `deadline_us`; while the other end refuses (not listening yet) and
// `retry_refused`, tries again every 100 ms. The socket comes back nonblocking.
// `tune`: TuneDataSocket before connecting (the window scale is chosen at the SYN).
Status ConnectBy(const std::string& host, int port, int64_t deadline_us, bool retry_refused,
                 UniqueFd* out, bool tune = false);
// accept() on a nonblocking listener: -1 when nothing waits. The new socket is nonblocking.
int AcceptNonBlocking(int listen_fd, std::string* remote);

void SetNonBlocking(int fd);
// TCP_NODELAY (the control rounds are latency bound) and 4 MiB kernel buffers (throughput).
void TuneDataSocket(int fd);

// Whole transfers on a nonblocking socket by a deadline. Errors say only what went wrong
// ("timed out", "closed by the other end", strerror); callers name the connection.
Status WriteAllBy(int fd, const void* data, size_t bytes, int64_t deadline_us);
Status ReadExactBy(int fd, void* data, size_t bytes, int64_t deadline_us);
// A frame: u32 length, then that many bytes (at most max_bytes, else an error).
Status WriteFrameBy(int fd, const std::string& payload, int64_t deadline_us);
Status ReadFrameBy(int fd, size_t max_bytes, int64_t deadline_us, std::string* payload);

void RandomBytes(void* out, size_t bytes);  // getrandom(): nonces, job ids
// The first IPv4 (else IPv6) address of network interface `iface` (HOROVOD_GLOO_IFACE).
Status InterfaceAddress(const std::string& iface, std::string* addr);
std::string SecondsString(int64_t us);  // "2 s", "0.5 s"

// Little-endian encoding of the setup messages.
class WireWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void U64(uint64_t v);
  void Bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void Str(const std::string& s) {  // u32 length, then the bytes
    U32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  const std::string& data() const { return out_; }

 private:
  std::string out_;
};

// Reads what WireWriter wrote; any read past the end sets !ok() and yields zeros.
class WireReader {
 public:
  WireReader(const void* p, size_t n) : p_(static_cast<const char*>(p)), n_(n) {}
  explicit WireReader(const std::string& s) : WireReader(s.data(), s.size()) {}
  uint8_t U8();
  uint32_t U32();
  int32_t I32() { return static_cast<int32_t>(U32()); }
  uint64_t U64();
  bool Bytes(void* out, size_t n);
  std::string Str(size_t max_len = 4096);
  bool ok() const { return ok_; }
  bool done() const { return ok_ && n_ == 0; }

 private:
  const char* p_;
  size_t n_;
  bool ok_ = true;
};

}  // namespace hvd
