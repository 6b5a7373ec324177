// GPU alltoall: in one NCCL group, a send of send_rows[r] rows to and a receive of
// recv_rows[r] rows from every rank r (the row counts were exchanged over MPI first, so each
// side knows what to expect). Each rank moves exactly the bytes it sends and receives.
#include "ops/nccl_collectives.h"

namespace hvd {

Status NcclAlltoall(const void* in, void* out, size_t row_bytes,
                    const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                    NcclComm* c, cudaStream_t stream, const std::string& tensor) {
  HVD_NCCL_CHECK(ncclGroupStart(), tensor);
  size_t send_off = 0, recv_off = 0;
  ncclResult_t rc = ncclSuccess;
  for (int r = 0; r < c->size && rc == ncclSuccess; ++r) {
    const size_t sb = static_cast<size_t>(send_rows[r]) * row_bytes;
    const size_t rb = static_cast<size_t>(recv_rows[r]) * row_bytes;
    if (sb)
      rc = ncclSend(static_cast<const char*>(in) + send_off, sb, ncclUint8, r, c->comm, stream);
    if (rc == ncclSuccess && rb)
      rc = ncclRecv(static_cast<char*>(out) + recv_off, rb, ncclUint8, r, c->comm, stream);
    send_off += sb;
    recv_off += rb;
  }
  const ncclResult_t end = ncclGroupEnd();
  HVD_NCCL_RESULT(rc, "ncclSend/ncclRecv", tensor);
  HVD_NCCL_RESULT(end, "ncclGroupEnd", tensor);
  return Status();
}

}  // namespace hvd
