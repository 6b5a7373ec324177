// What a TCP job needs to form: this process's place in it and where the ranks meet (the
// rendezvous), from the launcher's environment: upstream Horovod's Gloo variables (horovodrun
// --gloo, and the Spark/Ray launchers that set them) or torchrun's.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"

namespace hvd {

struct TcpOptions {
  // -1: unknown. local_*/cross_* are the launcher's view, checked against the topology found
  // from the host keys (a mismatch is logged, the host keys win).
  int rank = -1, size = -1, local_rank = -1, local_size = -1, cross_rank = -1, cross_size = -1;
  std::string rendezvous_addr;
  int rendezvous_port = 0;
  // This process runs the rendezvous server (rank 0 under torchrun); it listens on every
  // interface at rendezvous_port.
  bool host_rendezvous = false;
  std::string hostname;  // the host key; "" -> gethostname()
  // Address the data listener binds and advertises; "" -> the address of the interface this
  // process uses to reach the rendezvous server.
  std::string bind_addr;
  std::string secret_key;  // "" -> no authentication
  int64_t timeout_us = 120 * 1000000LL;
  int ranks_per_host = 0;        // HOROVOD_TOPOLOGY_RANKS_PER_HOST
  int connections_per_peer = 1;  // one is all this transport opens
  // Peers on this machine talk over Unix sockets where they can (local_links.h); false keeps
  // every link on TCP (tests of the TCP path itself).
  bool local_unix_sockets = true;
  // Large messages between ranks of one machine are copied once, by the receiver, straight from
  // the sender's memory where the kernel allows it (single_copy.h); HOROVOD_TCP_SINGLE_COPY.
  bool single_copy = true;
};

// Fills `o` from the environment. With HOROVOD_GLOO_RENDEZVOUS_ADDR: HOROVOD_RANK, HOROVOD_SIZE,
// HOROVOD_LOCAL_RANK/SIZE, HOROVOD_CROSS_RANK/SIZE, HOROVOD_HOSTNAME,
// HOROVOD_GLOO_RENDEZVOUS_PORT, HOROVOD_GLOO_IFACE; rank 0 hosts the server unless
// HOROVOD_RENDEZVOUS_SERVER=external (a launcher runs it). Otherwise torchrun's RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: the server listens at
// MASTER_PORT + 1 (or HOROVOD_RENDEZVOUS_PORT) and rank 0 hosts it. Both: HOROVOD_SECRET_KEY,
// HOROVOD_RENDEZVOUS_TIMEOUT (seconds, default 120), HOROVOD_TOPOLOGY_RANKS_PER_HOST.
// A missing or garbled value: InvalidArgument naming the variable.
Status TcpOptionsFromEnvironment(TcpOptions* o);
// Whether a launcher set up a TCP job: HOROVOD_GLOO_RENDEZVOUS_ADDR, or torchrun's RANK,
// WORLD_SIZE and MASTER_ADDR.
bool TcpEnvironmentPresent();

}  // namespace hvd
