// Baseline allreduce through MPI_Allreduce (HOROVOD_CPU_OPERATIONS=mpi), in place. Open MPI's
// `coll tuned` picks the algorithm (recursive doubling for small, ring/Rabenseifner for large
// buffers); it allocates a message-sized temporary per call, which is what our persistent-buffer
// ring avoids. Kept selectable as the reference the benchmarks compare against.
#include <algorithm>
#include <climits>

#include "common/watch_progress.h"
#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace hvd {

void MpiAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                  MPI_Comm comm) {
  const size_t piece = INT_MAX / 2;  // MPI counts are int
  const size_t esize = DataTypeSize(dtype);
  for (size_t done = 0; done < count; done += piece) {
    int n = static_cast<int>(std::min(piece, count - done));
    char* d = static_cast<char*>(dst) + done * esize;
    const void* s = src == dst ? MPI_IN_PLACE : static_cast<const char*>(src) + done * esize;
    HVD_MPI_CHECK(MPI_Allreduce(s, d, n, MpiDataType(dtype), MpiReduceOp(dtype, op), comm));
    WatchProgress();
  }
}

}  // namespace hvd
