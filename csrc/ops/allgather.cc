// Allgather with a first dimension that may differ per rank: each rank's rows are one segment
// of the output, and the segments travel around the ring (the allgather half of the ring
// allreduce). n-1 steps; each rank receives the B - B_r bytes it lacks and sends as many.
#include "common/watch_progress.h"
#include "ops/cpu_collectives.h"

namespace hvd {

void Allgather(const void* in, void* out, size_t row_bytes, const std::vector<int64_t>& first_dims,
               Comm& comm) {
  const int rank = comm.rank();
  Segments seg;
  size_t off = 0;
  for (auto rows : first_dims) {
    seg.offset.push_back(off);
    seg.count.push_back(static_cast<size_t>(rows));
    off += rows;
  }
  // A row is the unit ("element") of the ring here, so rows of any width move as one piece.
  // A new output's pages are faulted in first (seconds for GBs, most of this op's time when
  // outputs are fresh), then this rank's rows copied, both in pieces that count as progress:
  // the watchdog must not take this rank's local work, or the peers' wait for it, for a stall.
  PrefaultWithProgress(out, off * row_bytes);
  CopyWithProgress(static_cast<char*>(out) + seg.offset[rank] * row_bytes, in,
                   seg.count[rank] * row_bytes);
  if (row_bytes > 0) RingAllgather(out, row_bytes, seg, comm);
}

}  // namespace hvd
