// The TCP transport: forming the job and its Transport; see tcp_transport.h.
#include "transport/tcp/tcp_transport.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "common/logging.h"
#include "transport/tcp/local_links.h"
#include "transport/tcp/mesh_setup.h"
#include "transport/tcp/rendezvous.h"

namespace hvd {
namespace {

std::atomic<void (*)(int, int)> listener_hook{nullptr};
constexpr uint32_t kGlobalContext = 1;

}  // namespace

void SetTcpListenerHookForTest(void (*hook)(int rank, int port)) { listener_hook = hook; }

TcpTransport::TcpTransport(std::shared_ptr<TcpMesh> mesh, std::unique_ptr<TcpComm> comm,
                           const std::string& hostname, bool owns_mesh)
    : mesh_(std::move(mesh)), hostname_(hostname), owns_mesh_(owns_mesh) {
  rank = comm->rank();
  size = comm->size();
  comm_ = std::move(comm);
}

TcpTransport::~TcpTransport() { Finalize(); }

void TcpTransport::Finalize() {
  if (owns_mesh_ && mesh_) mesh_->Close();
  if (roll_call_) roll_call_->Close();
}

void TcpTransport::SendNote(int to, int64_t word) {
  if (roll_call_) roll_call_->Send(to, word);
}

void TcpTransport::PollNotes(std::vector<std::pair<int, int64_t>>* notes) {
  if (roll_call_) roll_call_->Poll(notes);
}

Status TcpTransport::AgreeOnRollCall(std::unique_ptr<UdpRollCall> rc) {
  // Every peer greeted before it built its mesh, and the mesh is whole: the hellos have been
  // sent and are all here but for a lost datagram or a network that drops UDP, hence the bound.
  const int64_t start = NowMicros();
  std::vector<int> unheard;
  if (rc) unheard = rc->AwaitHellos(500000);
  const int64_t heard = NowMicros();
  const bool mine = rc && unheard.empty();
  if (rc && !mine)
    HVD_LOG(DEBUG, "rank " << rank << ": no roll call over UDP: no hello from " << Ranks(unheard)
                           << " within 0.5 s");
  std::vector<std::string> all;
  try {
    all = AllgatherStrings(mine ? "1" : "0");
  } catch (const TransportError& e) {
    return Status::Internal(std::string("the TCP job could not agree on its roll call: ") +
                            e.what());
  }
  std::vector<int> without;
  for (int q = 0; q < size; ++q)
    if (all[q] != "1") without.push_back(q);
  if (without.empty()) {
    HVD_LOG(DEBUG, "rank " << rank << ": the watchdog's roll call runs over UDP port " << rc->port()
                           << " (every hello in " << (heard - start) << " us, the agreement in "
                           << (NowMicros() - heard) << " us)");
    roll_call_ = std::move(rc);
  } else {
    if (rc) rc->Close();
    HVD_LOG(DEBUG, "rank " << rank << ": the watchdog's roll call is off: " << Ranks(without)
                           << " could not bind or hear every peer over UDP; blocked collectives "
                              "name the ring neighbours instead");
  }
  return Status();
}

void TcpTransport::Abort(const std::string& why) {
  HVD_LOG(ERROR, "aborting the job: " << why);
  // The peers see their connections to this rank close and fail with TransportError.
  if (mesh_) mesh_->Close();
  std::_Exit(1);
}

std::unique_ptr<Comm> TcpTransport::SubComm(const std::vector<int>& members, int purpose) {
  const auto& parent = static_cast<const TcpComm&>(*comm_);
  std::vector<int> world;
  for (int m : members) world.push_back(parent.members()[m]);
  return std::make_unique<TcpComm>(mesh_, SubContext(parent.context(), purpose, world), world);
}

Status TcpTransport::FormTopology() {
  try {
    TopologyFromHostKeys(hostname_);
  } catch (const TransportError& e) {
    return Status::Internal(std::string("the TCP job could not learn its topology: ") + e.what());
  }
  return Status();
}

// Needs no message: every rank calls Subset in the same order with the same list, so each
// member derives the same context id from its count of calls. The topology is the only
// collective, over the members alone.
Status TcpTransport::Subset(const std::vector<int>& ranks, std::unique_ptr<Transport>* out) {
  out->reset();
  const int purpose = 3 + subsets_made_++;
  if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) return Status();
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] < 0 || ranks[i] >= size || (i > 0 && ranks[i] <= ranks[i - 1]))
      return Status::InvalidArgument(
          "a process set's ranks must be ascending ranks of the set, "
          "not " +
          RankList(ranks));
  std::unique_ptr<Comm> sub = SubComm(ranks, purpose);
  auto t = std::make_unique<TcpTransport>(
      mesh_, std::unique_ptr<TcpComm>(static_cast<TcpComm*>(sub.release())), hostname_, false);
  t->world_ranks = WorldRanks(ranks);
  t->ranks_per_host = ranks_per_host;
  Status s = t->FormTopology();
  if (!s.ok()) return s;
  *out = std::move(t);
  return Status();
}

Status CreateTcpTransport(const TcpOptions& o, std::unique_ptr<Transport>* out) {
  out->reset();
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return Status::InvalidArgument("TCP transport: rank " + std::to_string(o.rank) +
                                   " of a world of size " + std::to_string(o.size));
  if (o.timeout_us <= 0) return Status::InvalidArgument("TCP transport: timeout must be > 0");
  const std::string hostname = o.hostname.empty() ? LocalHostname() : o.hostname;
  auto mesh = std::make_shared<TcpMesh>(o.rank, o.size);
  int unix_links = 0, single_copy_links = 0;
  std::unique_ptr<UdpRollCall> roll_call;

  if (o.size > 1) {
    if (o.rendezvous_addr.empty() || o.rendezvous_port <= 0 || o.rendezvous_port > 65535)
      return Status::InvalidArgument("TCP transport: no rendezvous address (got '" +
                                     HostPort(o.rendezvous_addr, o.rendezvous_port) + "')");
    std::unique_ptr<RendezvousServer> server;
    if (o.host_rendezvous) {
      server = std::make_unique<RendezvousServer>();
      // Every interface: ranks of other hosts reach it by MASTER_ADDR, whatever that names.
      const std::string any = o.rendezvous_addr.find(':') != std::string::npos ? "::" : "";
      Status s = server->Start(any, o.rendezvous_port, o.size, o.secret_key, o.timeout_us);
      if (!s.ok()) return s;
    }
    RendezvousResult table;
    UniqueFd listener;
    RendezvousClient client;
    Status s = client.Connect(o.rendezvous_addr, o.rendezvous_port, o.timeout_us);
    if (s.ok()) {
      const std::string bind = o.bind_addr.empty() ? client.local_host() : o.bind_addr;
      int port = 0;
      s = Listen(bind, 0, "the data listener of rank " + std::to_string(o.rank), &listener, &port);
      if (s.ok()) {
        TuneDataSocket(listener.get());  // accepted connections inherit the buffer sizes
        if (auto hook = listener_hook.load()) hook(o.rank, port);
        // Bound before registering: once any rank has the table, every peer's socket is there.
        roll_call = std::make_unique<UdpRollCall>();
        std::string why;
        if (!roll_call->Bind(bind, port, &why)) {
          HVD_LOG(DEBUG, "rank " << o.rank << ": no roll call over UDP: " << why);
          roll_call.reset();
        }
        PeerInfo me{hostname, bind, port};
        s = client.Register(o.rank, o.size, o.secret_key, me, &table);
      }
    }
    client.Close();
    // The hosting rank stays until the server has answered every rank (or timed out), so that
    // late ranks hear the outcome rather than find no server.
    if (server) {
      Status ss = server->Wait();
      if (s.ok() && !ss.ok()) s = ss;
    }
    if (!s.ok()) return s;
    std::string why;
    if (roll_call && !roll_call->Start(table, o.rank, o.secret_key, &why)) {
      HVD_LOG(DEBUG, "rank " << o.rank << ": no roll call over UDP: " << why);
      roll_call.reset();
    }
    s = BuildMesh(table, o.secret_key, std::move(listener), o.timeout_us, mesh.get());
    if (!s.ok()) return s;
    s = MoveLocalLinksToUnixSockets(mesh.get(), o.local_unix_sockets, o.single_copy, o.timeout_us,
                                    &unix_links, &single_copy_links);
    if (!s.ok()) return s;
    HVD_LOG(DEBUG, "rank " << o.rank << ": " << unix_links << " of " << o.size - 1
                           << " links over Unix sockets (peers on this machine), "
                           << single_copy_links << " with single-copy sends");
  }

  std::vector<int> all(o.size);
  for (int r = 0; r < o.size; ++r) all[r] = r;
  auto t = std::make_unique<TcpTransport>(
      mesh, std::make_unique<TcpComm>(mesh, kGlobalContext, all), hostname, true);
  t->ranks_per_host = o.ranks_per_host;
  t->set_unix_links(unix_links);
  t->set_single_copy_links(single_copy_links);
  Status s = t->FormTopology();
  if (s.ok() && o.size > 1) s = t->AgreeOnRollCall(std::move(roll_call));
  if (!s.ok()) return s;
  if (o.ranks_per_host == 0 && o.local_rank >= 0 &&
      (o.local_rank != t->local_rank || (o.local_size > 0 && o.local_size != t->local_size)))
    HVD_LOG(WARNING, "the launcher says local rank "
                         << o.local_rank << " of " << o.local_size << ", the host names give "
                         << t->local_rank << " of " << t->local_size << " (host " << hostname
                         << "); using the host names'");
  *out = std::move(t);
  return Status();
}

}  // namespace hvd
