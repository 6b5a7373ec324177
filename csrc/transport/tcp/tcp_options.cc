// The TCP transport's options from the launcher's environment; see tcp_options.h.
#include "transport/tcp/tcp_options.h"

#include <cerrno>
#include <cstdlib>

#include "transport/tcp/socket_util.h"

namespace hvd {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// An integer variable in [lo, hi]; unset: *out keeps its value unless `required`.
Status IntVar(const char* name, bool required, long lo, long hi, int* out) {
  const char* v = Env(name);
  if (!v) {
    if (required) return Status::InvalidArgument(std::string(name) + " is not set");
    return Status();
  }
  errno = 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || *end != 0 || x < lo || x > hi)
    return Status::InvalidArgument(std::string(name) + "='" + v + "' is not an integer in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = static_cast<int>(x);
  return Status();
}

#define HVD_RETURN_IF_ERROR(expr) \
  do {                            \
    Status s_ = (expr);           \
    if (!s_.ok()) return s_;      \
  } while (0)

}  // namespace

bool TcpEnvironmentPresent() {
  return Env("HOROVOD_GLOO_RENDEZVOUS_ADDR") ||
         (Env("RANK") && Env("WORLD_SIZE") && Env("MASTER_ADDR"));
}

Status TcpOptionsFromEnvironment(TcpOptions* o) {
  constexpr long kMaxRanks = 1 << 24;
  const bool external = Env("HOROVOD_RENDEZVOUS_SERVER") &&
                        std::string(Env("HOROVOD_RENDEZVOUS_SERVER")) == "external";
  if (Env("HOROVOD_GLOO_RENDEZVOUS_ADDR")) {
    HVD_RETURN_IF_ERROR(IntVar("HOROVOD_SIZE", true, 1, kMaxRanks, &o->size));
    HVD_RETURN_IF_ERROR(IntVar("HOROVOD_RANK", true, 0, o->size - 1, &o->rank));
    HVD_RETURN_IF_ERROR(IntVar("HOROVOD_LOCAL_SIZE", false, 1, o->size, &o->local_size));
    HVD_RETURN_IF_ERROR(IntVar("HOROVOD_LOCAL_RANK", false, 0, o->size - 1, &o->local_rank));
    HVD_RETURN_IF_ERROR(IntVar("HOROVOD_CROSS_SIZE", false, 1, o->size, &o->cross_size));
    HVD_RETURN_IF_ERROR(IntVar("HOROVOD_CROSS_RANK", false, 0, o->size - 1, &o->cross_rank));
    o->rendezvous_addr = Env("HOROVOD_GLOO_RENDEZVOUS_ADDR");
    HVD_RETURN_IF_ERROR(
        IntVar("HOROVOD_GLOO_RENDEZVOUS_PORT", true, 1, 65535, &o->rendezvous_port));
    if (Env("HOROVOD_HOSTNAME")) o->hostname = Env("HOROVOD_HOSTNAME");
    if (Env("HOROVOD_GLOO_IFACE")) {
      HVD_RETURN_IF_ERROR(InterfaceAddress(Env("HOROVOD_GLOO_IFACE"), &o->bind_addr));
    }
  } else if (Env("RANK") && Env("WORLD_SIZE") && Env("MASTER_ADDR")) {
    HVD_RETURN_IF_ERROR(IntVar("WORLD_SIZE", true, 1, kMaxRanks, &o->size));
    HVD_RETURN_IF_ERROR(IntVar("RANK", true, 0, o->size - 1, &o->rank));
    HVD_RETURN_IF_ERROR(IntVar("LOCAL_WORLD_SIZE", false, 1, o->size, &o->local_size));
    HVD_RETURN_IF_ERROR(IntVar("LOCAL_RANK", false, 0, o->size - 1, &o->local_rank));
    o->rendezvous_addr = Env("MASTER_ADDR");
    if (Env("HOROVOD_RENDEZVOUS_PORT")) {
      HVD_RETURN_IF_ERROR(IntVar("HOROVOD_RENDEZVOUS_PORT", true, 1, 65535, &o->rendezvous_port));
    } else {
      // torchrun's own store listens at MASTER_PORT; ours takes the next one.
      int master_port = 0;
      HVD_RETURN_IF_ERROR(IntVar("MASTER_PORT", true, 1, 65534, &master_port));
      o->rendezvous_port = master_port + 1;
    }
  } else {
    return Status::InvalidArgument(
        "no TCP launcher environment: neither HOROVOD_GLOO_RENDEZVOUS_ADDR nor torchrun's "
        "RANK, WORLD_SIZE and MASTER_ADDR are set");
  }
  o->host_rendezvous = o->rank == 0 && !external;
  if (const char* t = Env("HOROVOD_RENDEZVOUS_TIMEOUT")) {
    char* end = nullptr;
    errno = 0;
    const double secs = std::strtod(t, &end);
    if (errno != 0 || *end != 0 || !(secs > 0) || secs > 1e7)
      return Status::InvalidArgument(std::string("HOROVOD_RENDEZVOUS_TIMEOUT='") + t +
                                     "' is not a positive number of seconds");
    o->timeout_us = static_cast<int64_t>(secs * 1e6);
  }
  if (const char* k = Env("HOROVOD_SECRET_KEY")) o->secret_key = k;
  HVD_RETURN_IF_ERROR(
      IntVar("HOROVOD_TOPOLOGY_RANKS_PER_HOST", false, 0, kMaxRanks, &o->ranks_per_host));
  // HOROVOD_TCP_CONNECTIONS_PER_PEER is not read: this transport opens one connection per peer.
  o->connections_per_peer = 1;
  return Status();
}

}  // namespace hvd
