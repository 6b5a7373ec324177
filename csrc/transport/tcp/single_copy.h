// Single-copy transfers between ranks of one machine (Linux cross-memory attach): the receiver
// copies a large message straight out of the sender's buffer with process_vm_readv, as Open
// MPI's shared-memory transport does, instead of the two copies of a socket (into the kernel,
// out of it). Between two ranks of a 2-core VM a 64 MiB allreduce over a Unix socket reached
// 0.70-0.74x MPI's shared memory; the socket's second copy was the gap.
//
// Whether a pair may use it is found out, not assumed: the kernel allows one process to read
// another's memory only where it may ptrace it (same user, no more capabilities than the
// reader, Yama's ptrace_scope, a container's seccomp profile). While the links move to Unix
// sockets (local_links.h) each rank offers the address of a random probe word; each peer tries
// to read it through its Unix socket's peer pid (SO_PEERCRED: the pid as this rank's pid
// namespace sees it) and tells the offering rank whether it could. A rank sends single-copy
// messages only to peers that read its probe; the rest stay on the socket.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace hvd {

// Messages at least this large, on a tag of the collectives (below kTagUserMax), to a peer that
// can read this rank's memory, cross as a descriptor and are copied by the receiver.
constexpr size_t kSingleCopyBytes = 64 << 10;

// This process's probe word: its address and the random value it holds.
struct ProbeWord {
  uint64_t addr = 0, value = 0;
};
ProbeWord OwnProbeWord();

// Lets peers read this process's memory where Yama restricts ptrace to descendants
// (ptrace_scope 1): PR_SET_PTRACER_ANY, as Open MPI does for its own single-copy path. Nothing
// where ptrace_scope is 0 or absent; where it is 2 or 3 nothing helps (the probe then fails).
void AllowPeersToReadMemory();

// The pid of a Unix socket's other end, 0 if the kernel does not say.
pid_t UnixPeerPid(int fd);

// Whether `pid`'s probe word at `probe` can be read and holds the value offered.
bool CanReadProbe(pid_t pid, const ProbeWord& probe);

// Copies `bytes` at `remote` in `pid`'s memory to `dst`; 0, or the errno of the failure.
int ReadPeerMemory(pid_t pid, void* dst, uint64_t remote, size_t bytes);

}  // namespace hvd
