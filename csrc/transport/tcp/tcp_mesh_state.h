// The TCP mesh's private state, shared by its two source files: tcp_comm.cc (the socket data
// path, matching) and tcp_comm_single_copy.cc (descriptors, copies out of a peer's memory and
// their acknowledgements). Not for use outside the mesh.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "transport/tcp/tcp_comm.h"

namespace hvd {
namespace tcp_mesh {

constexpr size_t kHeader = 16;
constexpr size_t kStage = 64 << 10;
// A payload rest at least this large is read straight into its destination, not staged.
constexpr size_t kDirectRead = 16 << 10;
// A message at least this large that arrives before its receive waits in the kernel (held)
// rather than in a malloc'd buffer: a ring's next chunk often lands while the previous one is
// reduced, and buffering it cost an allocation, its page faults and a second copy (16 MiB
// allreduces at 2 ranks: a fifth of the bytes).
constexpr size_t kHoldBytes = 64 << 10;
constexpr int kMaxBatch = 32;  // messages per sendmsg()
// Up to this many peers, a test reads and writes each connection straight away rather than
// poll() first: one system call per connection instead of two where data waits.
constexpr int kDirectPeers = 2;
// A single-copy message (single_copy.h) has this bit set in its header's length and carries,
// instead of its payload, a descriptor {u64 address of the payload in the sender, u64 id}. The
// receiver copies the payload out of the sender's memory when a receive matches, then answers
// with an acknowledgement: a header of context kAckContext (no Comm has it) whose length field
// is the id. The send completes on that answer.
constexpr uint64_t kDescriptorBit = uint64_t(1) << 63;
constexpr size_t kDescriptorBytes = 16;
constexpr uint32_t kAckContext = 0;

}  // namespace tcp_mesh

struct TcpMesh::Request {
  // Every request not yet reported complete is on the mesh's list, so that the mesh frees those
  // a caller abandoned (after a TransportError) when it goes away.
  Request *prev = nullptr, *next = nullptr;
  bool send = false, done = false;
  char* buf = nullptr;
  uint64_t len = 0;            // send: payload bytes; receive: capacity
  uint64_t got = 0;            // receive: the matched message's length
  size_t* received = nullptr;  // receive: where the caller wants that length, if anywhere
  uint32_t ctx = 0;
  int32_t tag = 0;
  char hdr[tcp_mesh::kHeader];
  // A single-copy send: written, it waits for the receiver's acknowledgement of `ack_id`; `buf`
  // is then `desc`. An internal request (an acknowledgement) is freed once written.
  bool await_ack = false, internal = false;
  uint64_t ack_id = 0;
  char desc[tcp_mesh::kDescriptorBytes];
};

struct TcpMesh::Unexpected {
  uint32_t ctx;
  int32_t tag;
  char* data;  // malloc'd, null when len is 0 or remote
  uint64_t len;
  bool complete;
  // A single-copy message: its payload is still at `raddr` in the sender, which waits for the
  // acknowledgement of `rid`.
  bool remote = false;
  uint64_t raddr = 0, rid = 0;
};

struct TcpMesh::Peer {
  UniqueFd fd;
  std::string addr;
  // Why the connection closed while nothing was pending with this peer (it finished first):
  // no failure yet, but any later transfer with it is one.
  std::string gone;
  // Sending: queued messages, and how much of the first one (header + payload) went out.
  std::deque<Request*> sendq;
  size_t head_sent = 0;
  // Receiving: the header being read, then the payload of the message it announced.
  char hdr[tcp_mesh::kHeader];
  size_t hdr_got = 0;
  bool in_payload = false;
  uint64_t pay_len = 0, pay_got = 0;
  char* pay_dst = nullptr;
  uint32_t pay_ctx = 0;
  int32_t pay_tag = 0;
  // The message's payload stays in the kernel until a receive for it (or for a later message)
  // is posted, or this rank naps; nothing behind it on this connection is read meanwhile.
  bool held = false;
  Request* pay_req = nullptr;       // the posted receive it goes to, or
  Unexpected* pay_unexp = nullptr;  // the buffer it goes to until one is posted
  std::unique_ptr<char[]> stage;
  size_t stage_off = 0, stage_len = 0;
  std::deque<Request*> posted;       // unmatched receives, in posting order
  std::list<Unexpected> unexpected;  // unmatched messages, in arrival order
  // Single copy: the peer's pid where this rank may read its memory (0: no), whether this rank
  // sends it descriptors, the descriptor being read, and the sends awaiting its acknowledgement.
  pid_t read_pid = 0;
  bool send_descriptors = false;
  bool pay_desc = false;
  uint64_t desc_len = 0;
  char desc[tcp_mesh::kDescriptorBytes];
  std::vector<Request*> acks_due;
};

}  // namespace hvd
