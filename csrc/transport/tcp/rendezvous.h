// The rendezvous of a TCP job: every rank tells one server where its data listener is, and the
// server answers everyone with the whole table once all `size` ranks have registered. It runs
// in a thread of rank 0 (torchrun, horovodrun --gloo) or of a driver that is not a rank
// (HOROVOD_RENDEZVOUS_SERVER=external: Spark, Ray), one job per server.
//
// Protocol (frames: u32 little-endian length, then the payload; integers little-endian):
//   server -> client  hello     {magic "HVDR", version, nonce[32]}
//   client -> server  register  {magic, version, rank i32, size i32, proof[32], hostname,
//                                data addr, data port u32}        (strings: u32 length + bytes)
//   server -> client  answer    {0, job id u64, size u32, size x {hostname, addr, port u32}}
//                            or {1, error message}
// proof = HMAC-SHA256(secret, nonce || rank as u32) with HOROVOD_SECRET_KEY; without a key it is
// 32 zero bytes and the magic alone tells a Horovod rank from a stray connection. The job id
// (random, from the server) goes into every mesh handshake, so a stale rank of an earlier job
// on a reused port is refused.
// Checks: world sizes agree, each rank claimed once, rank in range; any violation is sent to
// every rank that registered (and to later ones) and ends the job's setup. Connections that do
// not speak the protocol (or fail the proof) are logged, closed, and do not disturb the job.
// Cost: one connection and three small frames per rank; the server's loop is one poll() over
// the pending connections.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/common.h"
#include "transport/tcp/hmac_sha256.h"
#include "transport/tcp/socket_util.h"

namespace hvd {

constexpr uint32_t kRendezvousMagic = 0x52445648;  // "HVDR"
constexpr uint32_t kMeshMagic = 0x4d445648;        // "HVDM"
constexpr uint32_t kTcpProtocolVersion = 1;
using Nonce = std::array<uint8_t, 32>;

// HMAC(secret, nonce || rank); zeros without a secret.
Sha256Digest KeyProof(const std::string& secret, const Nonce& nonce, int rank);

struct PeerInfo {
  std::string hostname, addr;
  int port = 0;
};

struct RendezvousResult {
  uint64_t job_id = 0;
  std::vector<PeerInfo> peers;  // index = rank
};

// Serves one job's rendezvous in its own thread.
class RendezvousServer {
 public:
  RendezvousServer() = default;
  ~RendezvousServer() { Stop(); }
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // Listens on addr:port ("" = every IPv4 interface, port 0 = ephemeral) and serves until all
  // `size` ranks were answered or `timeout_us` passed. Fails if it cannot listen (the port is
  // taken: the error names address:port).
  Status Start(const std::string& addr, int port, int size, const std::string& secret,
               int64_t timeout_us);
  int port() const { return port_; }
  // Ends the thread early (closing every connection) and joins it; idempotent.
  void Stop();
  // Joins the thread once it finishes by itself; the job's outcome as the server saw it.
  Status Wait();

 private:
  struct Pending;
  struct Slot;
  class Session;  // one run of Serve()'s loop (rendezvous.cc)
  void Serve();
  void Answer(int fd, const std::string& frame);

  UniqueFd listen_fd_, wake_read_, wake_write_;
  std::thread thread_;
  std::string addr_, secret_;
  int port_ = 0, size_ = 0;
  int64_t deadline_us_ = 0, timeout_us_ = 0;
  std::mutex mu_;
  Status result_;
};

// One rank's side: Connect (retrying until the server is up), learn the local address the
// server is reached from (to advertise when no bind address is given), then Register.
class RendezvousClient {
 public:
  Status Connect(const std::string& addr, int port, int64_t timeout_us);
  const std::string& local_host() const { return local_host_; }
  Status Register(int rank, int size, const std::string& secret, const PeerInfo& me,
                  RendezvousResult* out);
  void Close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  std::string server_, local_host_;
  int64_t start_us_ = 0, timeout_us_ = 0;
};

}  // namespace hvd
