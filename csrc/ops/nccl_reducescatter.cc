// GPU reducescatter. Rows divide evenly: one ncclReduceScatter (ring, (n-1)/n of the input
// sent per rank). Otherwise, in one NCCL group, a ncclReduce of each rank's rows to that rank:
// the same bytes reduced, as n concurrent reductions. Scale factors and Average as allreduce.
#include "ops/nccl_collectives.h"

namespace hvd {

Status NcclReducescatter(const void* src, void* out, size_t row_elems,
                         const std::vector<int64_t>& rows_of, DataType dtype, ReduceOp op,
                         double scale, NcclComm* c, cudaStream_t stream,
                         const std::string& tensor) {
  NcclReduce red;
  Status s = NcclReduction(dtype, op, scale, c, &red, tensor);
  if (!s.ok()) return s;
  bool equal = true;
  for (auto rows : rows_of) equal = equal && rows == rows_of[0];
  ncclResult_t rc = ncclSuccess, end = ncclSuccess;
  const size_t esize = DataTypeSize(dtype);
  if (equal) {
    rc = ncclReduceScatter(src, out, static_cast<size_t>(rows_of[0]) * row_elems, red.type, red.op,
                           c->comm, stream);
  } else {
    rc = ncclGroupStart();
    size_t off = 0;
    for (int r = 0; r < c->size && rc == ncclSuccess; ++r) {
      const size_t count = static_cast<size_t>(rows_of[r]) * row_elems;
      // recvbuff is read only on the root; `out` is a valid device pointer everywhere.
      rc = ncclReduce(static_cast<const char*>(src) + off * esize, out, count, red.type, red.op, r,
                      c->comm, stream);
      off += count;
    }
    end = ncclGroupEnd();
  }
  NcclReleaseOp(red, c);
  HVD_NCCL_RESULT(rc, equal ? "ncclReduceScatter" : "ncclReduce (reducescatter of unequal rows)",
                  tensor);
  HVD_NCCL_RESULT(end, "ncclGroupEnd", tensor);
  return Status();
}

}  // namespace hvd
