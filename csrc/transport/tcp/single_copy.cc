// Cross-memory attach for ranks of one machine; why and when in single_copy.h.
#include "transport/tcp/single_copy.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <fstream>

#include "transport/tcp/socket_util.h"

namespace hvd {

ProbeWord OwnProbeWord() {
  // Written once, before any peer reads it (the offer that names it goes out after).
  static volatile uint64_t word = 0;
  static const ProbeWord probe = [] {
    uint64_t v = 0;
    while (v == 0) RandomBytes(&v, sizeof(v));
    word = v;
    return ProbeWord{reinterpret_cast<uint64_t>(&word), v};
  }();
  return probe;
}

void AllowPeersToReadMemory() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (f >> scope && scope == 1) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

pid_t UnixPeerPid(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

bool CanReadProbe(pid_t pid, const ProbeWord& probe) {
  if (pid <= 0 || probe.addr == 0) return false;
  uint64_t got = 0;
  return ReadPeerMemory(pid, &got, probe.addr, sizeof(got)) == 0 && got == probe.value;
}

int ReadPeerMemory(pid_t pid, void* dst, uint64_t remote, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(dst) + done, bytes - done};
    iovec far{reinterpret_cast<void*>(remote + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;  // nothing readable at that address
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace hvd
