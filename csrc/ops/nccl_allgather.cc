// GPU allgather. Equal first dimensions: one ncclAllGather (ring, (n-1)/n of the output
// received per rank). Unequal ones: in one NCCL group, every rank broadcasts its rows into its
// own segment of every output; NCCL runs the n broadcasts concurrently, and each rank still
// receives only the B - B_r bytes it lacks. Bytes are moved as uint8: no reduction happens.
#include "ops/nccl_collectives.h"

namespace hvd {

Status NcclAllgather(const void* in, void* out, size_t row_bytes,
                     const std::vector<int64_t>& first_dims, NcclComm* c, cudaStream_t stream,
                     const std::string& tensor) {
  bool equal = true;
  for (auto d : first_dims) equal = equal && d == first_dims[0];
  if (equal) {
    const size_t bytes = static_cast<size_t>(first_dims[0]) * row_bytes;
    HVD_NCCL_CHECK(ncclAllGather(in, out, bytes, ncclUint8, c->comm, stream), tensor);
    return Status();
  }
  HVD_NCCL_CHECK(ncclGroupStart(), tensor);
  size_t off = 0;
  ncclResult_t rc = ncclSuccess;
  for (int r = 0; r < c->size && rc == ncclSuccess; ++r) {
    const size_t bytes = static_cast<size_t>(first_dims[r]) * row_bytes;
    char* dst = static_cast<char*>(out) + off;
    rc = ncclBroadcast(r == c->rank ? in : dst, dst, bytes, ncclUint8, r, c->comm, stream);
    off += bytes;
  }
  const ncclResult_t end = ncclGroupEnd();  // always close the group, even after an error
  HVD_NCCL_RESULT(rc, "ncclBroadcast (allgather of unequal rows)", tensor);
  HVD_NCCL_RESULT(end, "ncclGroupEnd", tensor);
  return Status();
}

}  // namespace hvd
