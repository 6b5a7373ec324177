// The data path of the TCP transport: one connection per pair of ranks (the mesh), shared by
// every Comm of the job (global, local, cross, process sets), and the Comms over it.
//
// Wire format per message: a 16-byte header {context id u32, tag i32, length u64} (host byte
// order: the ranks of one job share an architecture), then `length` bytes. A Comm's messages
// carry its context id, so Comms on one connection never match each other's.
// Matching: per peer, a receive takes the first unmatched message with its (context, tag) in
// arrival order (IrecvUpTo: any length up to its capacity; Irecv: up to its size as well). A
// message with no receive posted yet is buffered (malloc'd, any size) and copied out when the
// receive comes; a receive posted while that message is still arriving takes the rest of it
// directly. Except: one of 64 KiB or more, arriving while no receive of that peer's is posted,
// is held: left in the kernel, with what follows it on the connection, until a receive takes it
// (no copy) or one for a later message is posted or this rank naps (it is then buffered, so a
// sender waiting for its send never waits on this rank's own wait for more than its spin).
// Progress happens only inside the calls (TestAll/TestAny/Isend/Nap), on the calling thread:
// one poll() with a zero timeout over every connection (with at most 2 peers, none: a read on
// each straight away), then nonblocking reads and writes until the kernel would block. Sends
// are queued per peer and written with sendmsg() of up to 32 messages (header and payload as
// separate iovecs, no copy); payloads of matched receives
// are read straight into the receive's buffer (small messages through a 64 KiB staging buffer,
// one recv() for many). Cost per call: one poll() over the connections (or a recv() per
// connection) plus the reads and writes that move data. Peers on one machine use Unix sockets
// (local_links.h); the data path is the same. Not thread safe (ThreadsMultiple() is false).
// A broken connection (EOF, reset, or a message larger than its receive) with something
// pending fails the mesh: every later post, and every test that still has something pending,
// throws TransportError naming the peer. A peer that closes while nothing is pending with it
// (it finalized first, at the end of a job) fails the mesh only when this rank next posts a
// transfer with it.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "transport/tcp/socket_util.h"
#include "transport/transport.h"

namespace hvd {

class TcpMesh {
 public:
  TcpMesh(int rank, int size);
  ~TcpMesh();
  TcpMesh(const TcpMesh&) = delete;
  TcpMesh& operator=(const TcpMesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Adopts the handshaken connection to world rank `peer`; `addr` names it in errors. Before any
  // transfer, setup may replace a connection this way (local_links.h).
  void SetPeer(int peer, UniqueFd fd, const std::string& addr);
  // Setup, on a link to a peer of this machine (single_copy.h): `read_pid` (its pid, 0: none) if
  // this rank may copy messages out of its memory; `send_descriptors` if it may out of this one.
  void SetSingleCopy(int peer, pid_t read_pid, bool send_descriptors);
  int PeerFd(int peer) const;  // setup only: the connection's socket
  const std::string& PeerAddr(int peer) const;
  // Closes every connection; later calls throw ("the TCP transport was finalized").
  void Close();

  // Peers are world ranks. A transfer completed at once comes back default (complete).
  Transfer Isend(const void* data, size_t bytes, int peer, uint32_t ctx, int32_t tag);
  // Takes a message of up to `bytes`; `received`, if not null, gets its length once matched.
  Transfer Irecv(void* data, size_t bytes, int peer, uint32_t ctx, int32_t tag,
                 size_t* received = nullptr);
  bool TestAll(int n, Transfer* t);
  int TestAny(int n, Transfer* t, bool* all_idle);
  void Nap(long us);

 private:
  struct Request;
  struct Unexpected;
  struct Peer;

  Request* NewRequest();
  void Release(Request* r);  // off the live list, deleted
  void Progress();
  void WritePeer(int q);
  void ReadPeer(int q);
  // Starts the payload of the message whose header was just read from `q`.
  void StartMessage(int q, uint32_t ctx, int32_t tag, uint64_t len);
  // Sends the payload of `q`'s current message to a malloc'd buffer (it had no receive); false
  // if out of memory (the mesh failed).
  bool Buffer(int q);
  void FinishMessage(Peer& p);
  // Single copy: a descriptor read from `q` is matched (and copied) or kept as unexpected; the
  // copy out of `q`'s memory (false: the mesh failed); the acknowledgement both ways.
  void FinishDescriptor(int q);
  bool CopyFromPeer(int q, void* dst, uint64_t addr, uint64_t len);
  void SendAck(int q, uint64_t id);
  void Acknowledged(int q, uint64_t id);
  static void Matched(Request* r, uint64_t len);
  void TooLong(int q, uint64_t len, int32_t tag,
               uint64_t capacity);  // fails the mesh  // `r` takes a message of `len` bytes
  void DeliverToSelf(const void* data, size_t bytes, uint32_t ctx, int32_t tag);
  // Records the mesh's failure (the first one wins) and closes that connection.
  void Fail(int q, const std::string& reason);
  [[noreturn]] void ThrowFailure() const;
  int PollSet(std::vector<pollfd>* pfds, std::vector<int>* who) const;

  int rank_, size_;
  std::vector<std::unique_ptr<Peer>> peers_;  // index = world rank; this rank's: loopback
  Request* live_ = nullptr;                   // requests not yet reported complete
  uint64_t next_ack_id_ = 1;                  // single-copy sends, numbered
  bool failed_ = false, closed_ = false;
  int fail_peer_ = -1;
  std::string fail_what_;
};

// A Comm over the mesh: `members` are world ranks (ascending), `ctx` tells its messages apart.
class TcpComm : public Comm {
 public:
  TcpComm(std::shared_ptr<TcpMesh> mesh, uint32_t ctx, std::vector<int> members);
  Transfer Isend(const void* data, size_t bytes, int peer, int tag) override;
  Transfer Irecv(void* data, size_t bytes, int peer, int tag) override;
  Transfer IrecvUpTo(void* data, size_t capacity, int peer, int tag, size_t* received) override;
  bool TestAll(int n, Transfer* t) override { return mesh_->TestAll(n, t); }
  int TestAny(int n, Transfer* t, bool* all_idle) override {
    return mesh_->TestAny(n, t, all_idle);
  }
  void Nap(long us) override { mesh_->Nap(us); }

  uint32_t context() const { return ctx_; }
  const std::vector<int>& members() const { return members_; }
  const std::shared_ptr<TcpMesh>& mesh() const { return mesh_; }

 private:
  int WorldPeer(int peer) const;

  std::shared_ptr<TcpMesh> mesh_;
  uint32_t ctx_;
  std::vector<int> members_;
};

// The context id of a Comm of `members` (world ranks) made from the Comm `parent` for
// `purpose`: a hash, the same on every member, never 0 (the global Comm's is 1).
uint32_t SubContext(uint32_t parent, int purpose, const std::vector<int>& members);

}  // namespace hvd
