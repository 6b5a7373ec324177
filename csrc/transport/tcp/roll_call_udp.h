// The watchdog's roll call over a TCP job (engine/watchdog.h): one-word notes between ranks on a
// UDP socket of their own, so the watchdog's thread can send and read them while the engine's
// thread is blocked in, or busy beside, the mesh's sockets (tcp_comm.h is driven by that thread
// alone, and a blocked rank's stream may be mid-message).
//
// Each rank binds a UDP socket to its data listener's address and the same port number (UDP
// and TCP ports are apart), so the rendezvous table already says where every peer's is. A note
// is one datagram (little-endian, 52 bytes):
//   {magic "HVDN", job id u64, from i32, to i32, counter u64, word i64, mac[16]}
// mac = the first 16 bytes of HMAC-SHA256(HOROVOD_SECRET_KEY, the 36 bytes before it); without a
// key the same HMAC under an empty key, which only guards against corruption. A datagram is
// taken only if it is addressed to this rank in this job (the rendezvous' random id), comes from
// the (address, port) its `from` rank registered, carries a valid mac and a counter that the
// sender has not used before (a 64-wide window, as IPsec's, tolerates reordering): a stray, a
// forger without the key, or a replay of a captured note is dropped and counted.
// Reachability is checked once, at setup: every rank greets every peer with a hello (word -1)
// and the job uses the roll call only if every rank heard every peer (tcp_transport.cc).
// Threads: after setup only the watchdog's thread sends and polls; Close() (Finalize) may come
// from another thread, so the socket is used under a mutex (never held across a wait).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"
#include "transport/tcp/rendezvous.h"
#include "transport/tcp/socket_util.h"

namespace hvd {

constexpr uint32_t kNoteMagic = 0x4e445648;  // "HVDN"
constexpr size_t kNoteBytes = 52;
constexpr int64_t kHelloWord = -1;  // the setup's greeting; real words are >= 0

// One note's bytes, mac included (also what the tests forge with).
std::string EncodeNote(const std::string& secret, uint64_t job_id, int from, int to,
                       uint64_t counter, int64_t word);

class UdpRollCall {
 public:
  // Why datagrams were dropped, by the check that refused them.
  struct Drops {
    int64_t malformed = 0;   // wrong size, magic, job or receiver
    int64_t bad_source = 0;  // not from the address and port its `from` rank registered
    int64_t bad_mac = 0;     // a forger without the key, or a corrupted datagram
    int64_t replayed = 0;    // a counter used before (or too old to tell)
    int64_t total() const { return malformed + bad_source + bad_mac + replayed; }
  };

  // Binds addr:port (the data listener's; 0: any, for tests). False, with why in *error.
  bool Bind(const std::string& addr, int port, std::string* error);
  // Learns every peer's address from the table and greets each with a hello. False (with why)
  // if a peer's address cannot be resolved.
  bool Start(const RendezvousResult& table, int rank, const std::string& secret,
             std::string* error);
  // Polls until a hello from every peer has come or `timeout_us` passes, greeting them again
  // every 50 ms; the peers not heard from (empty: all).
  std::vector<int> AwaitHellos(int64_t timeout_us);

  void Send(int to, int64_t word);  // to < 0: every peer
  // Appends (sender, word) for every valid note that has arrived (hellos are not notes).
  void Poll(std::vector<std::pair<int, int64_t>>* notes);
  void Close();

  Drops drops();
  int port();
  // Tests only: the counter of the next note sent (to replay one).
  void set_next_counter_for_test(uint64_t c);

 private:
  struct Peer {
    sockaddr_storage addr{};
    socklen_t len = 0;
    uint64_t top = 0, window = 0;  // highest counter taken, and which of the 64 below it were
    bool greeted = false;          // a hello came
  };
  void SendLocked(int to, int64_t word);
  void ReadLocked();
  bool Accept(const char* buf, size_t n, const sockaddr_storage& src, socklen_t src_len);

  std::mutex mu_;
  UniqueFd fd_;
  int port_ = 0, rank_ = -1;
  uint64_t job_id_ = 0, next_counter_ = 1;
  std::string secret_;
  std::vector<Peer> peers_;  // index = rank
  std::vector<std::pair<int, int64_t>> inbox_;
  Drops drops_;
};

}  // namespace hvd
