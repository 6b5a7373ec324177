// Hierarchical allreduce and allgather: two levels, the ranks of one host (shared memory, fast)
// and the ranks of one local rank across hosts (the network, slow). Both need every host to hold
// the same number of ranks, l per host on c hosts (n = l c); the engine checks that first.
//
// Allreduce of B bytes:
//   1. ring reduce-scatter inside the host: local rank j holds the host's sum of segment j (B/l);
//   2. ring allreduce of segment j across the hosts, among the c ranks of local rank j;
//   3. ring allgather inside the host.
// A host sends 2(c-1)/c * B over the network, through its l ranks at once. The flat ring over n
// ranks placed host by host sends 2(n-1)/n * B out of each host through one rank (2x2: 1.5 B
// against 1 B), one stream per host boundary. The shared-memory steps add (l-1)/l * B each way.
//
// Allgather of the rows of every rank into one output of B bytes (row counts may differ):
//   1. ring allgather across the hosts among the ranks of local rank j ("column" j): each rank
//      then holds the rows of its column, one block per host;
//   2. ring allgather of the columns inside the host: l-1 steps, each moving one column.
// A host sends (c-1)/c * B over the network (each of its blocks once to every other host); the
// flat ring passes (n-1)/n * B through each host boundary (2x2: 0.75 B against 0.5 B).
#include <cstring>
#include <vector>

#include "common/watch_progress.h"
#include "ops/collectives.h"
#include "ops/ring_steps.h"

namespace hvd {
namespace {

constexpr int kColumnTag = 300;

}  // namespace

void HierarchicalAllreducePieces(const TensorPieces& t, DataType dtype, ReduceOp op,
                                 size_t chunk_bytes, RingScratch* scratch, MPI_Comm local,
                                 MPI_Comm cross, const SegmentFn& finish) {
  size_t count = 0;
  for (size_t c : t.count) count += c;
  if (count == 0) return;
  int local_rank, local_size, cross_size;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_size(cross, &cross_size);
  const size_t esize = DataTypeSize(dtype);
  const Segments seg = EvenSegments(count, local_size);
  RingReduceScatterPieces(t, seg, dtype, op, chunk_bytes, scratch, local);
  const TensorPieces mine = SliceOfOutputs(t, seg.offset[local_rank], seg.count[local_rank], esize);
  if (cross_size > 1) {
    RingAllreducePieces(mine, dtype, op, chunk_bytes, scratch, cross, finish);
  } else if (finish) {
    for (size_t i = 0; i < mine.count.size(); ++i) finish(mine.dst[i], mine.count[i]);
  }
  RingAllgatherPieces(t, seg, esize, chunk_bytes, scratch, local);
}

void HierarchicalAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                           size_t chunk_bytes, RingScratch* scratch, MPI_Comm local, MPI_Comm cross,
                           const SegmentFn& finish) {
  HierarchicalAllreducePieces(OneTensor(src, dst, count), dtype, op, chunk_bytes, scratch, local,
                              cross, finish);
}

void HierarchicalAllgather(const void* in, void* out, size_t row_bytes,
                           const std::vector<int64_t>& first_dims, const HostLayout& layout,
                           MPI_Comm local, MPI_Comm cross) {
  const int n = static_cast<int>(first_dims.size());
  std::vector<size_t> offset(n + 1, 0);
  for (int r = 0; r < n; ++r) offset[r + 1] = offset[r] + static_cast<size_t>(first_dims[r]);
  char* base = static_cast<char*>(out);
  PrefaultWithProgress(out, offset[n] * row_bytes);
  CopyWithProgress(base + offset[layout.rank] * row_bytes, in,
                   static_cast<size_t>(first_dims[layout.rank]) * row_bytes);
  if (row_bytes == 0) return;
  // 1. This rank's column across the hosts: segment i is the rows of cross member i.
  Segments column;
  for (int r : layout.cross_members) {
    column.offset.push_back(offset[r]);
    column.count.push_back(static_cast<size_t>(first_dims[r]));
  }
  RingAllgather(out, row_bytes, column, cross);
  // 2. The columns around the host's ring. Column j is local rank j's rows on every host, one
  // piece per host in host order, so sender and receiver cut it the same way.
  int local_rank, local_size;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  if (local_size == 1) return;
  // rank_at[h * l + j]: the rank that is local rank j on host h.
  std::vector<int> rank_at(static_cast<size_t>(layout.num_hosts) * local_size, -1);
  for (int r = 0; r < n; ++r) rank_at[layout.host_of[r] * local_size + layout.local_rank_of[r]] = r;
  const int right = RingMod(local_rank + 1, local_size), left = RingMod(local_rank - 1, local_size);
  for (int s = 0; s < local_size - 1; ++s) {
    const int send_col = RingMod(local_rank - s, local_size);
    const int recv_col = RingMod(local_rank - s - 1, local_size);
    for (int h = 0; h < layout.num_hosts; ++h) {
      const int sr = rank_at[h * local_size + send_col], rr = rank_at[h * local_size + recv_col];
      SendRecvBytes(base + offset[sr] * row_bytes, first_dims[sr] * row_bytes, right,
                    base + offset[rr] * row_bytes, first_dims[rr] * row_bytes, left, kColumnTag + s,
                    local);
    }
  }
}

}  // namespace hvd
