// Allgather with a first dimension that may differ per rank: each rank's rows are one segment
// of the output, and the segments travel around the ring (the allgather half of the ring
// allreduce). n-1 steps; each rank receives the B - B_r bytes it lacks and sends as many.
#include <cstring>

#include "ops/collectives.h"

namespace hvd {

void Allgather(const void* in, void* out, size_t row_bytes, const std::vector<int64_t>& first_dims,
               MPI_Comm comm) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  Segments seg;
  size_t off = 0;
  for (auto rows : first_dims) {
    seg.offset.push_back(off);
    seg.count.push_back(static_cast<size_t>(rows));
    off += rows;
  }
  // A row is the unit ("element") of the ring here, so rows of any width move as one piece.
  std::memcpy(static_cast<char*>(out) + seg.offset[rank] * row_bytes, in,
              seg.count[rank] * row_bytes);
  if (row_bytes > 0) RingAllgather(out, row_bytes, seg, comm);
}

}  // namespace hvd
