// The TCP transport: ranks meet at a rendezvous server (rendezvous.h), connect a full mesh of
// TCP connections (mesh_setup.h), and exchange messages over it (tcp_comm.h). Hosts are told
// apart by host name (or HOROVOD_TOPOLOGY_RANKS_PER_HOST); local and cross Comms and process
// sets are Comms over the same connections with their own context ids, so nothing but the
// mesh's size - 1 sockets per rank stays open, and no thread runs once the job has formed.
// The watchdog's roll call goes beside the mesh, on a UDP socket per rank (roll_call_udp.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/common.h"
#include "transport/tcp/roll_call_udp.h"
#include "transport/tcp/tcp_comm.h"
#include "transport/tcp/tcp_options.h"
#include "transport/transport.h"

namespace hvd {

// Forms the job (rendezvous, mesh, topology); collective over all `o.size` ranks. Errors name
// what went wrong and where (the server's address, the missing ranks, the peer).
Status CreateTcpTransport(const TcpOptions& o, std::unique_ptr<Transport>* out);

// Tests only: called with (rank, port of its data listener) after the listener opens and
// before the rank registers. Null (the default): nothing is called.
void SetTcpListenerHookForTest(void (*hook)(int rank, int port));

class TcpTransport : public Transport {
 public:
  TcpTransport(std::shared_ptr<TcpMesh> mesh, std::unique_ptr<TcpComm> comm,
               const std::string& hostname, bool owns_mesh);
  ~TcpTransport() override;
  const char* Name() const override { return "tcp"; }
  Status Subset(const std::vector<int>& ranks, std::unique_ptr<Transport>* out) override;
  // The global set's closes every connection (its process sets' Comms with it) and the roll
  // call's socket; idempotent. The engine stops the watchdog first, and the socket is closed
  // under the channel's lock, so a late note cannot meet a closed or reused descriptor.
  void Finalize() override;
  [[noreturn]] void Abort(const std::string& why) override;
  std::string ProcessorName() const override { return hostname_; }

  // The topology, collective over this set (TopologyFromHostKeys); TransportError -> Status.
  Status FormTopology();
  // How many of this rank's links run over Unix sockets (local_links.h): logs and tests.
  int unix_links() const { return unix_links_; }
  void set_unix_links(int n) { unix_links_ = n; }
  // To how many of those peers this rank sends large messages as single-copy descriptors.
  int single_copy_links() const { return single_copy_links_; }
  void set_single_copy_links(int n) { single_copy_links_ = n; }

  // The roll call (global set only): on when every rank bound its UDP socket and heard every
  // peer's hello at setup. Collective over this set: every rank learns every rank's outcome, so
  // that the job has the roll call everywhere or nowhere (a rank without it would be named
  // silent by the others). `rc` is null where this rank could not bind.
  Status AgreeOnRollCall(std::unique_ptr<UdpRollCall> rc);
  bool roll_call_available() const override { return roll_call_ != nullptr; }
  void SendNote(int to, int64_t word) override;
  void PollNotes(std::vector<std::pair<int, int64_t>>* notes) override;
  UdpRollCall* roll_call_for_test() { return roll_call_.get(); }

 protected:
  std::unique_ptr<Comm> SubComm(const std::vector<int>& members, int purpose) override;

 private:
  std::shared_ptr<TcpMesh> mesh_;
  std::string hostname_;
  bool owns_mesh_;
  int subsets_made_ = 0;  // every rank counts every Subset call: the same on all
  int unix_links_ = 0, single_copy_links_ = 0;
  std::unique_ptr<UdpRollCall> roll_call_;
};

}  // namespace hvd
