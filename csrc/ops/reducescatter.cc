// Reducescatter: the reduce-scatter half of the ring allreduce on segments aligned to rows of
// the first dimension (the first ranks get one extra row when rows do not divide evenly).
// n-1 steps; each rank sends and receives (n-1)/n * B bytes, then keeps its own segment.
#include <cstring>

#include "ops/cpu_collectives.h"

namespace hvd {

void Reducescatter(const void* src, void* work, size_t count, size_t row_elems, DataType dtype,
                   ReduceOp op, size_t chunk_bytes, RingScratch* scratch, Comm& comm, void* out) {
  const int rank = comm.rank(), n = comm.size();
  Segments seg = EvenSegments(count, n, row_elems);
  RingReduceScatter(src, work, dtype, op, seg, chunk_bytes, scratch, comm);
  const size_t esize = DataTypeSize(dtype);
  std::memcpy(out, static_cast<char*>(work) + seg.offset[rank] * esize, seg.count[rank] * esize);
}

}  // namespace hvd
