// Broadcast from any root through MPI_Bcast, cut into 64 MiB pieces so byte counts above INT_MAX
// work and the watchdog sees progress after each piece. Open MPI's tuned component chooses the tree
// (binomial for small, pipelined chain or split-binary tree for large messages): about B bytes
// received per rank, log2(n) latency steps.
#include <algorithm>

#include "common/watch_progress.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace hvd {

void Broadcast(void* buf, size_t bytes, int root, MPI_Comm comm) {
  constexpr size_t kPiece = size_t(64) << 20;
  char* p = static_cast<char*>(buf);
  for (size_t done = 0; done < bytes; done += kPiece) {
    int n = static_cast<int>(std::min(kPiece, bytes - done));
    HVD_MPI_CHECK(MPI_Bcast(p + done, n, MPI_BYTE, root, comm));
    WatchProgress();
  }
}

}  // namespace hvd
