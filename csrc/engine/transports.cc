#include "engine/transports.h"

#include <map>
#include <mutex>

#include "engine/engine.h"
#include "transport/tcp/rendezvous.h"
#include "transport/tcp/tcp_options.h"
#include "transport/tcp/tcp_transport.h"

namespace hvd {

std::string ChooseTransport(const Config& c, bool adopted_comm) {
  if (c.transport != "auto") return c.transport;
  if (adopted_comm || MpiLauncherPresent() || !TcpEnvironmentPresent()) return "mpi";
  return "tcp";
}

Status StartTransport(const Config& c, uintptr_t comm_handle, std::unique_ptr<Transport>* net,
                      MpiTransport** mpi) {
  *mpi = nullptr;
  if (ChooseTransport(c, comm_handle != 0) == "tcp") {
    if (comm_handle != 0)
      return Status::InvalidArgument(
          "init(comm=...) adopts an MPI communicator, but HOROVOD_TRANSPORT=tcp; use the MPI "
          "transport (HOROVOD_TRANSPORT=mpi or auto) to run on an mpi4py communicator");
    TcpOptions o;
    Status s = TcpOptionsFromEnvironment(&o);
    if (!s.ok()) return s;
    o.timeout_us = static_cast<int64_t>(c.rendezvous_timeout_s * 1e6);
    o.ranks_per_host = static_cast<int>(c.topology_ranks_per_host);
    o.single_copy = c.tcp_single_copy;
    return CreateTcpTransport(o, net);
  }
  auto m = std::make_unique<MpiTransport>();
  m->ranks_per_host = static_cast<int>(c.topology_ranks_per_host);
  // mpi4py's MPI._handleof(): a pointer in Open MPI, an int in MPICH; a C cast fits both.
  Status s = m->Init(comm_handle ? (MPI_Comm)comm_handle : MPI_COMM_NULL, c.mpi_threads_disable);
  if (!s.ok()) return s;
  *mpi = m.get();
  *net = std::move(m);
  return Status();
}

std::string TransportChoice() {
  std::string error;
  return ChooseTransport(Config::FromEnvironment(&error), false);
}

namespace {

std::mutex g_servers_mu;
std::map<int64_t, std::unique_ptr<RendezvousServer>> g_servers;
int64_t g_next_server = 1;

}  // namespace

Status StartRendezvousServer(const std::string& addr, int port, int size, const std::string& secret,
                             double timeout_s, int64_t* handle, int* bound_port) {
  if (size < 1) return Status::InvalidArgument("a rendezvous needs a world size of at least 1");
  auto server = std::make_unique<RendezvousServer>();
  Status s = server->Start(addr, port, size, secret, static_cast<int64_t>(timeout_s * 1e6));
  if (!s.ok()) return s;
  *bound_port = server->port();
  std::lock_guard<std::mutex> lk(g_servers_mu);
  *handle = g_next_server++;
  g_servers[*handle] = std::move(server);
  return Status();
}

void StopRendezvousServer(int64_t handle) {
  std::unique_ptr<RendezvousServer> server;
  {
    std::lock_guard<std::mutex> lk(g_servers_mu);
    auto it = g_servers.find(handle);
    if (it == g_servers.end()) return;
    server = std::move(it->second);
    g_servers.erase(it);
  }
  server->Stop();
}

}  // namespace hvd
