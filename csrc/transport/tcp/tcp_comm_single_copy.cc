// Single-copy transfers of the TCP mesh (single_copy.h): a descriptor goes out instead of the
// payload, the receiver copies the payload out of the sender's memory when a receive matches,
// then acknowledges; the wire format is in tcp_mesh_state.h.
#include <cstring>
#include <string>

#include "transport/tcp/single_copy.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_mesh_state.h"

namespace hvd {

using namespace tcp_mesh;  // NOLINT: the mesh's own constants

void TcpMesh::SetSingleCopy(int peer, pid_t read_pid, bool send_descriptors) {
  peers_[peer]->read_pid = read_pid;
  peers_[peer]->send_descriptors = send_descriptors;
}

void TcpMesh::FinishDescriptor(int q) {
  Peer& p = *peers_[q];
  p.pay_desc = false;
  p.in_payload = false;
  p.pay_dst = nullptr;
  uint64_t addr, id;
  std::memcpy(&addr, p.desc, 8);
  std::memcpy(&id, p.desc + 8, 8);
  const uint64_t len = p.desc_len;
  if (p.read_pid == 0) {
    Fail(q, "rank " + std::to_string(q) + " (" + p.addr +
                ") sent a single-copy message, but this rank cannot read its memory");
    return;
  }
  for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
    Request* r = *it;
    if (r->ctx != p.pay_ctx || r->tag != p.pay_tag) continue;
    if (len > r->len) {
      TooLong(q, len, p.pay_tag, r->len);
      return;
    }
    p.posted.erase(it);
    Matched(r, len);
    if (!CopyFromPeer(q, r->buf, addr, len)) return;
    r->done = true;
    SendAck(q, id);
    return;
  }
  p.unexpected.push_back({p.pay_ctx, p.pay_tag, nullptr, len, true, true, addr, id});
}

bool TcpMesh::CopyFromPeer(int q, void* dst, uint64_t addr, uint64_t len) {
  Peer& p = *peers_[q];
  const int err = len > 0 ? ReadPeerMemory(p.read_pid, dst, addr, len) : 0;
  if (err == 0) return true;
  Fail(q, "copying a message of " + std::to_string(len) + " bytes out of rank " +
              std::to_string(q) + "'s memory (" + p.addr + ", pid " + std::to_string(p.read_pid) +
              ") failed: " + std::strerror(err) + " (did its process exit?)");
  return false;
}

void TcpMesh::SendAck(int q, uint64_t id) {
  Peer& p = *peers_[q];
  if (!p.fd.valid()) return;
  auto* r = NewRequest();
  r->send = true;
  r->internal = true;
  const int32_t tag = 0;
  std::memcpy(r->hdr, &kAckContext, 4);
  std::memcpy(r->hdr + 4, &tag, 4);
  std::memcpy(r->hdr + 8, &id, 8);
  p.sendq.push_back(r);
  if (p.sendq.size() == 1) WritePeer(q);
}

void TcpMesh::Acknowledged(int q, uint64_t id) {
  Peer& p = *peers_[q];
  for (auto it = p.acks_due.begin(); it != p.acks_due.end(); ++it) {
    if ((*it)->ack_id != id) continue;
    (*it)->done = true;
    p.acks_due.erase(it);
    return;
  }
  Fail(q, "rank " + std::to_string(q) + " (" + p.addr +
              ") acknowledged a single-copy message this rank did not send (id " +
              std::to_string(id) + ")");
}

}  // namespace hvd
