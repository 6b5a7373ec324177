// Baseline allreduce through MPI_Allreduce (HOROVOD_CPU_OPERATIONS=mpi), in place. Open MPI's
// `coll tuned` picks the algorithm (recursive doubling for small, ring/Rabenseifner for large
// buffers); it allocates a message-sized temporary per call, which is what our persistent-buffer
// ring avoids. Kept selectable as the reference the benchmarks compare against.
#include <algorithm>
#include <climits>

#include "mpi/mpi_context.h"
#include "ops/collectives.h"

namespace hvd {

void MpiAllreduce(void* buf, size_t count, DataType dtype, ReduceOp op, MPI_Comm comm) {
  const size_t piece = INT_MAX / 2;  // MPI counts are int
  char* p = static_cast<char*>(buf);
  for (size_t done = 0; done < count; done += piece) {
    int n = static_cast<int>(std::min(piece, count - done));
    HVD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p + done * DataTypeSize(dtype), n,
                                MpiDataType(dtype), MpiReduceOp(dtype, op), comm));
  }
}

}  // namespace hvd
