// The Comms over the TCP mesh (tcp_comm.h): a Comm's ranks are world ranks of the mesh, and its
// messages carry its context id.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "transport/tcp/tcp_comm.h"

namespace hvd {

uint32_t SubContext(uint32_t parent, int purpose, const std::vector<int>& members) {
  uint32_t h = 2166136261u;  // FNV-1a over the three
  auto mix = [&h](uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 16777619u;
    }
  };
  mix(parent);
  mix(static_cast<uint32_t>(purpose));
  mix(static_cast<uint32_t>(members.size()));
  for (int m : members) mix(static_cast<uint32_t>(m));
  return h <= 1 ? h + 2 : h;
}

TcpComm::TcpComm(std::shared_ptr<TcpMesh> mesh, uint32_t ctx, std::vector<int> members)
    : mesh_(std::move(mesh)), ctx_(ctx), members_(std::move(members)) {
  size_ = static_cast<int>(members_.size());
  rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), mesh_->rank()) -
                           members_.begin());
}

int TcpComm::WorldPeer(int peer) const {
  if (peer < 0 || peer >= size_)
    throw std::invalid_argument("peer " + std::to_string(peer) + " of a Comm of " +
                                std::to_string(size_) + " ranks");
  return members_[peer];
}

Transfer TcpComm::Isend(const void* data, size_t bytes, int peer, int tag) {
  return mesh_->Isend(data, bytes, WorldPeer(peer), ctx_, tag);
}

Transfer TcpComm::Irecv(void* data, size_t bytes, int peer, int tag) {
  return mesh_->Irecv(data, bytes, WorldPeer(peer), ctx_, tag);
}

Transfer TcpComm::IrecvUpTo(void* data, size_t capacity, int peer, int tag, size_t* received) {
  return mesh_->Irecv(data, capacity, WorldPeer(peer), ctx_, tag, received);
}

}  // namespace hvd
