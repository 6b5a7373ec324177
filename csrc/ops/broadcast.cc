// Broadcast from any root through the transport's Bcast, cut into 64 MiB pieces so byte counts
// above INT_MAX work and the watchdog sees progress after each piece. Under MPI that is MPI_Bcast,
// whose tuned component chooses the tree (binomial for small, pipelined chain or split-binary
// tree for large messages): about B bytes received per rank, log2(n) latency steps. Elsewhere it
// is a chain pipelined in 1 MiB pieces (transport.cc): B bytes per rank, n - 1 + B/1 MiB steps.
#include <algorithm>

#include "common/watch_progress.h"
#include "ops/cpu_collectives.h"

namespace hvd {

void Broadcast(void* buf, size_t bytes, int root, Comm& comm) {
  constexpr size_t kPiece = size_t(64) << 20;
  char* p = static_cast<char*>(buf);
  for (size_t done = 0; done < bytes; done += kPiece) {
    comm.Bcast(p + done, std::min(kPiece, bytes - done), root);
    WatchProgress();
  }
}

}  // namespace hvd
