// The TCP transport's data path; the format and the matching rules are in tcp_comm.h.
#include "transport/tcp/tcp_comm.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "common/logging.h"
#include "transport/tcp/single_copy.h"
#include "transport/tcp/tcp_mesh_state.h"

namespace hvd {

using namespace tcp_mesh;  // NOLINT: the mesh's own constants
TcpMesh::TcpMesh(int rank, int size) : rank_(rank), size_(size) {
  for (int q = 0; q < size; ++q) peers_.push_back(std::make_unique<Peer>());
}

TcpMesh::~TcpMesh() {
  Close();
  while (live_) Release(live_);
}

TcpMesh::Request* TcpMesh::NewRequest() {
  auto* r = new Request;
  r->next = live_;
  if (live_) live_->prev = r;
  live_ = r;
  return r;
}

void TcpMesh::Release(Request* r) {
  (r->prev ? r->prev->next : live_) = r->next;
  if (r->next) r->next->prev = r->prev;
  delete r;
}

void TcpMesh::SetPeer(int peer, UniqueFd fd, const std::string& addr) {
  Peer& p = *peers_[peer];
  p.fd = std::move(fd);
  p.addr = addr;
  p.stage.reset(new char[kStage]);
}

int TcpMesh::PeerFd(int peer) const { return peers_[peer]->fd.get(); }
const std::string& TcpMesh::PeerAddr(int peer) const { return peers_[peer]->addr; }

void TcpMesh::Close() {
  if (closed_) return;
  closed_ = true;
  for (auto& p : peers_) {
    p->fd.reset();
    for (Unexpected& u : p->unexpected) std::free(u.data);
    p->unexpected.clear();
    p->stage.reset();
  }
  if (!failed_) {
    failed_ = true;
    fail_what_ = "the TCP transport was finalized";
  }
}

void TcpMesh::Fail(int q, const std::string& what) {
  if (!failed_) {
    failed_ = true;
    fail_peer_ = q;
    fail_what_ = what;
    HVD_LOG(WARNING, what);
  }
  // Closing it tells that peer at once, rather than when it next needs this rank.
  peers_[q]->fd.reset();
}

void TcpMesh::ThrowFailure() const { throw TransportError(fail_what_, fail_peer_); }

int TcpMesh::PollSet(std::vector<pollfd>* pfds, std::vector<int>* who) const {
  pfds->clear();
  who->clear();
  for (int q = 0; q < size_; ++q) {
    const Peer& p = *peers_[q];
    if (q == rank_ || !p.fd.valid()) continue;
    pfds->push_back({p.fd.get(), static_cast<short>(POLLIN | (p.sendq.empty() ? 0 : POLLOUT)), 0});
    who->push_back(q);
  }
  return static_cast<int>(pfds->size());
}

Transfer TcpMesh::Isend(const void* data, size_t bytes, int peer, uint32_t ctx, int32_t tag) {
  if (failed_) ThrowFailure();
  if (peer == rank_) {
    DeliverToSelf(data, bytes, ctx, tag);
    return Transfer{};
  }
  Peer& p = *peers_[peer];
  if (!p.gone.empty()) {
    Fail(peer, p.gone);
    ThrowFailure();
  }
  auto* r = NewRequest();
  r->send = true;
  r->buf = static_cast<char*>(const_cast<void*>(data));
  r->len = bytes;
  uint64_t len = bytes;
  if (p.send_descriptors && bytes >= kSingleCopyBytes && tag >= 0 && tag < kTagUserMax) {
    r->await_ack = true;
    r->ack_id = next_ack_id_++;
    const uint64_t addr = reinterpret_cast<uint64_t>(data);
    std::memcpy(r->desc, &addr, 8);
    std::memcpy(r->desc + 8, &r->ack_id, 8);
    r->buf = r->desc;
    r->len = kDescriptorBytes;
    len = bytes | kDescriptorBit;
    p.acks_due.push_back(r);
  }
  std::memcpy(r->hdr, &ctx, 4);
  std::memcpy(r->hdr + 4, &tag, 4);
  std::memcpy(r->hdr + 8, &len, 8);
  p.sendq.push_back(r);
  // An idle connection takes the message now: most small messages never queue.
  if (p.sendq.size() == 1) WritePeer(peer);
  if (failed_) {
    p.sendq.erase(std::remove(p.sendq.begin(), p.sendq.end(), r), p.sendq.end());
    p.acks_due.erase(std::remove(p.acks_due.begin(), p.acks_due.end(), r), p.acks_due.end());
    Release(r);
    ThrowFailure();
  }
  if (r->done) {
    Release(r);
    return Transfer{};
  }
  return Transfer{r};
}

void TcpMesh::Matched(Request* r, uint64_t len) {
  r->got = len;
  if (r->received) *r->received = static_cast<size_t>(len);
}

void TcpMesh::TooLong(int q, uint64_t len, int32_t tag, uint64_t capacity) {
  Fail(q, "rank " + std::to_string(q) + " (" + peers_[q]->addr + ") sent a message of " +
              std::to_string(len) + " bytes with tag " + std::to_string(tag) + " to a receive of " +
              std::to_string(capacity) + " bytes");
}

Transfer TcpMesh::Irecv(void* data, size_t bytes, int peer, uint32_t ctx, int32_t tag,
                        size_t* received) {
  if (failed_) ThrowFailure();
  Peer& p = *peers_[peer];
  auto receive = [&] {
    auto* r = NewRequest();
    r->buf = static_cast<char*>(data);
    r->len = bytes;
    r->received = received;
    r->ctx = ctx;
    r->tag = tag;
    return r;
  };
  // The message now arriving (unexpected or held) goes on straight into `data`.
  auto take_current = [&](uint64_t len) {
    Request* r = receive();
    Matched(r, len);
    p.pay_req = r;
    p.pay_dst = r->buf;
    return Transfer{r};
  };
  for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
    if (it->ctx != ctx || it->tag != tag) continue;
    if (it->len > bytes) {
      TooLong(peer, it->len, tag, bytes);
      ThrowFailure();
    }
    const uint64_t len = it->len;
    if (it->remote) {
      const uint64_t addr = it->raddr, id = it->rid;
      p.unexpected.erase(it);
      if (!CopyFromPeer(peer, data, addr, len)) ThrowFailure();
      if (received) *received = static_cast<size_t>(len);
      SendAck(peer, id);
      if (failed_) ThrowFailure();
      return Transfer{};
    }
    if (it->complete) {
      if (received) *received = static_cast<size_t>(len);
      if (len > 0) std::memcpy(data, it->data, len);
      std::free(it->data);
      p.unexpected.erase(it);
      return Transfer{};
    }
    // Still arriving (the last one of the list): the rest goes straight to `data`.
    std::memcpy(data, it->data, p.pay_got);
    std::free(it->data);
    p.unexpected.erase(it);
    p.pay_unexp = nullptr;
    return take_current(len);
  }
  if (p.held) {
    if (p.pay_ctx == ctx && p.pay_tag == tag) {
      if (p.pay_len > bytes) {
        TooLong(peer, p.pay_len, tag, bytes);
        ThrowFailure();
      }
      p.held = false;
      return take_current(p.pay_len);
    }
    // A later message is wanted: reading goes on past this one.
    if (!Buffer(peer)) ThrowFailure();
  }
  if (!p.gone.empty()) {  // what it sent before it left was matched above
    Fail(peer, p.gone);
    ThrowFailure();
  }
  Request* r = receive();
  p.posted.push_back(r);
  return Transfer{r};
}

void TcpMesh::DeliverToSelf(const void* data, size_t bytes, uint32_t ctx, int32_t tag) {
  Peer& p = *peers_[rank_];
  for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
    Request* r = *it;
    if (r->ctx != ctx || r->tag != tag) continue;
    if (bytes > r->len)
      throw TransportError("a message of " + std::to_string(bytes) + " bytes to itself with tag " +
                               std::to_string(tag) + " for a receive of " + std::to_string(r->len) +
                               " bytes",
                           rank_);
    if (bytes > 0) std::memcpy(r->buf, data, bytes);
    Matched(r, bytes);
    r->done = true;
    p.posted.erase(it);
    return;
  }
  char* copy = nullptr;
  if (bytes > 0) {
    copy = static_cast<char*>(std::malloc(bytes));
    if (!copy) throw TransportError("out of memory buffering a message to itself", rank_);
    std::memcpy(copy, data, bytes);
  }
  p.unexpected.push_back({ctx, tag, copy, bytes, true});
}

void TcpMesh::WritePeer(int q) {
  Peer& p = *peers_[q];
  while (!p.sendq.empty() && p.fd.valid()) {
    iovec iov[2 * kMaxBatch];
    int n = 0;
    size_t off = p.head_sent, total = 0;
    for (Request* r : p.sendq) {
      if (n >= 2 * kMaxBatch - 1) break;
      if (off < kHeader) iov[n++] = {r->hdr + off, kHeader - off};
      const size_t poff = off > kHeader ? off - kHeader : 0;
      if (r->len > poff) iov[n++] = {r->buf + poff, r->len - poff};
      total += kHeader + r->len - off;
      off = 0;
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = n;
    const ssize_t w = sendmsg(p.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Fail(q, "connection to rank " + std::to_string(q) + " (" + p.addr +
                  ") closed: " + std::strerror(errno));
      return;
    }
    size_t left = static_cast<size_t>(w);
    while (!p.sendq.empty()) {
      Request* r = p.sendq.front();
      const size_t rest = kHeader + r->len - p.head_sent;
      if (left < rest) {
        p.head_sent += left;
        break;
      }
      left -= rest;
      p.sendq.pop_front();
      p.head_sent = 0;
      if (r->internal)
        Release(r);
      else if (!r->await_ack)
        r->done = true;
    }
    if (static_cast<size_t>(w) < total) return;  // the kernel's buffer is full
  }
}

void TcpMesh::StartMessage(int q, uint32_t ctx, int32_t tag, uint64_t len) {
  Peer& p = *peers_[q];
  // A single-copy message's descriptor is read first; FinishDescriptor then matches it.
  p.pay_desc = (len & kDescriptorBit) != 0;
  p.desc_len = len & ~kDescriptorBit;
  p.pay_len = p.pay_desc ? kDescriptorBytes : len;
  p.pay_got = 0;
  p.pay_ctx = ctx;
  p.pay_tag = tag;
  p.pay_req = nullptr;
  p.pay_unexp = nullptr;
  p.in_payload = true;
  if (p.pay_desc) {
    p.pay_dst = p.desc;
    return;
  }
  for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
    Request* r = *it;
    if (r->ctx != ctx || r->tag != tag) continue;
    if (len > r->len) {
      TooLong(q, len, tag, r->len);
      return;
    }
    p.posted.erase(it);
    Matched(r, len);
    p.pay_req = r;
    p.pay_dst = r->buf;
    break;
  }
  // No receive of this peer's is posted: its receive is likely next, and the message can wait.
  // With receives posted (for later messages), reading must go on past it: buffered.
  if (!p.pay_req && len >= kHoldBytes && p.posted.empty()) {
    p.held = true;
    return;
  }
  if (!p.pay_req && !Buffer(q)) return;
  if (len == 0) FinishMessage(p);
}

bool TcpMesh::Buffer(int q) {
  Peer& p = *peers_[q];
  p.held = false;
  char* data = nullptr;
  if (p.pay_len > 0 && !(data = static_cast<char*>(std::malloc(p.pay_len)))) {
    Fail(q, "out of memory buffering a message of " + std::to_string(p.pay_len) +
                " bytes from rank " + std::to_string(q));
    return false;
  }
  p.unexpected.push_back({p.pay_ctx, p.pay_tag, data, p.pay_len, false});
  p.pay_unexp = &p.unexpected.back();
  p.pay_dst = data;
  return true;
}

void TcpMesh::FinishMessage(Peer& p) {
  if (p.pay_req) p.pay_req->done = true;
  if (p.pay_unexp) p.pay_unexp->complete = true;
  p.pay_req = nullptr;
  p.pay_unexp = nullptr;
  p.pay_dst = nullptr;
  p.in_payload = false;
}

void TcpMesh::ReadPeer(int q) {
  Peer& p = *peers_[q];
  // recv() into `dst`: the bytes read, 0 when the kernel has none now, -1 after a failure.
  auto recv_some = [&](char* dst, size_t cap) -> ssize_t {
    while (true) {
      const ssize_t n = recv(p.fd.get(), dst, cap, MSG_DONTWAIT);
      if (n > 0) return n;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
      const std::string what =
          "connection to rank " + std::to_string(q) + " (" + p.addr + ") closed: " +
          (n == 0 ? std::string("end of stream (its process exited or finalized)")
                  : std::string(std::strerror(errno)));
      const bool idle = p.sendq.empty() && p.posted.empty() && !p.in_payload && p.hdr_got == 0 &&
                        p.stage_len == 0 && p.acks_due.empty();
      if (idle) {
        // A peer that finalized first (the end of a job, or of a test): not a failure unless
        // this rank still wants something from it.
        HVD_LOG(DEBUG, what);
        p.gone = what;
        p.fd.reset();
      } else {
        Fail(q, what);
      }
      return -1;
    }
  };
  auto refill = [&]() {
    const ssize_t n = recv_some(p.stage.get(), kStage);
    if (n <= 0) return false;
    p.stage_off = 0;
    p.stage_len = static_cast<size_t>(n);
    return true;
  };
  while (p.fd.valid() && !p.held) {
    if (!p.in_payload) {
      const size_t take = std::min(kHeader - p.hdr_got, p.stage_len);
      std::memcpy(p.hdr + p.hdr_got, p.stage.get() + p.stage_off, take);
      p.hdr_got += take;
      p.stage_off += take;
      p.stage_len -= take;
      if (p.hdr_got < kHeader) {
        if (!refill()) return;
        continue;
      }
      uint32_t ctx;
      int32_t tag;
      uint64_t len;
      std::memcpy(&ctx, p.hdr, 4);
      std::memcpy(&tag, p.hdr + 4, 4);
      std::memcpy(&len, p.hdr + 8, 8);
      p.hdr_got = 0;
      if (ctx == kAckContext)
        Acknowledged(q, len);
      else
        StartMessage(q, ctx, tag, len);
      continue;
    }
    const uint64_t left = p.pay_len - p.pay_got;
    if (p.stage_len > 0) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(left, p.stage_len));
      std::memcpy(p.pay_dst + p.pay_got, p.stage.get() + p.stage_off, take);
      p.pay_got += take;
      p.stage_off += take;
      p.stage_len -= take;
    } else if (left >= kDirectRead) {
      const ssize_t n =
          recv_some(p.pay_dst + p.pay_got, static_cast<size_t>(std::min<uint64_t>(left, 1 << 30)));
      if (n <= 0) return;
      p.pay_got += static_cast<uint64_t>(n);
    } else if (!refill()) {
      return;
    }
    if (p.pay_got == p.pay_len) {
      if (p.pay_desc)
        FinishDescriptor(q);
      else
        FinishMessage(p);
    }
  }
}

void TcpMesh::Progress() {
  if (closed_) return;
  if (size_ - 1 <= kDirectPeers) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_ || !peers_[q]->fd.valid()) continue;
      if (!peers_[q]->sendq.empty()) WritePeer(q);
      ReadPeer(q);
    }
    return;
  }
  static thread_local std::vector<pollfd> pfds;
  static thread_local std::vector<int> who;
  if (PollSet(&pfds, &who) == 0) return;
  if (poll(pfds.data(), pfds.size(), 0) <= 0) return;
  for (size_t i = 0; i < pfds.size(); ++i) {
    const short ev = pfds[i].revents;
    if (!ev) continue;
    const int q = who[i];
    if ((ev & (POLLOUT | POLLERR | POLLHUP)) && !peers_[q]->sendq.empty()) WritePeer(q);
    if (ev & (POLLIN | POLLERR | POLLHUP)) ReadPeer(q);
  }
}

void TcpMesh::Nap(long us) {
  static thread_local std::vector<pollfd> pfds;
  static thread_local std::vector<int> who;
  const timespec ts{us / 1000000, (us % 1000000) * 1000};
  // A rank that naps waits for something else: a held message is buffered, so that a peer
  // waiting for its send to complete is never stuck behind this rank's wait (and the poll
  // below does not wake at once for data left unread).
  for (int q = 0; q < size_; ++q)
    if (peers_[q]->held && Buffer(q)) ReadPeer(q);
  if (closed_ || PollSet(&pfds, &who) == 0) {
    nanosleep(&ts, nullptr);
    return;
  }
  ppoll(pfds.data(), pfds.size(), &ts, nullptr);
}

bool TcpMesh::TestAll(int n, Transfer* t) {
  bool pending = false;
  for (int i = 0; i < n && !pending; ++i)
    pending = t[i].handle && !static_cast<Request*>(t[i].handle)->done;
  if (pending) Progress();
  bool all = true;
  for (int i = 0; i < n; ++i) {
    auto* r = static_cast<Request*>(t[i].handle);
    if (!r) continue;
    if (r->done) {
      Release(r);
      t[i].handle = nullptr;
    } else {
      all = false;
    }
  }
  if (!all && failed_) ThrowFailure();
  return all;
}

int TcpMesh::TestAny(int n, Transfer* t, bool* all_idle) {
  bool any = false;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i) {
      auto* r = static_cast<Request*>(t[i].handle);
      if (!r) continue;
      any = true;
      if (r->done) {
        Release(r);
        t[i].handle = nullptr;
        *all_idle = false;
        return i;
      }
    }
    if (!any) {
      *all_idle = true;
      return -1;
    }
    if (pass == 0) Progress();
  }
  *all_idle = false;
  if (failed_) ThrowFailure();
  return -1;
}

}  // namespace hvd
