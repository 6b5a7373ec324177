// MPI setup: initialize MPI (or adopt a communicator), derive the node-local and cross-node
// communicators, and provide the controller's transport (bit-vector allreduce, request gather,
// response broadcast). Only the background thread calls these after Init.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"

#define HVD_MPI_CHECK(call)                                                              \
  do {                                                                                   \
    int hvd_mpi_rc_ = (call);                                                            \
    if (hvd_mpi_rc_ != MPI_SUCCESS) ::hvd::MpiFatal(#call, hvd_mpi_rc_, __FILE__, __LINE__); \
  } while (0)

namespace hvd {

[[noreturn]] void MpiFatal(const char* call, int rc, const char* file, int line);
MPI_Datatype MpiDataType(DataType t);  // MPI_UINT16_T for float16/bfloat16
// MPI_Op for MPI_Allreduce on `t`; float16/bfloat16 get user-defined ops reducing in float32.
MPI_Op MpiReduceOp(DataType t, ReduceOp op);
std::string MpiLibraryVersion();  // callable before MPI_Init

class MpiContext {
 public:
  // comm == MPI_COMM_NULL: use MPI_COMM_WORLD. MPI is initialized here if nobody did yet.
  Status Init(MPI_Comm comm, bool threads_disable);
  // Frees communicators; finalizes MPI only if Init initialized it.
  void Finalize();

  MPI_Comm comm() const { return comm_; }          // control + data, background thread only
  MPI_Comm raw_comm() const { return raw_comm_; }  // for diagnostics/benchmarks of the bare ring
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool threads_multiple = false;
  bool homogeneous = true;

  // Controller transport.
  // Bitwise AND of `bits` across ranks. A rank with work waiting spins a while (peers usually
  // arrive within microseconds in steady state); otherwise, and after that, it polls with short
  // sleeps so an early rank leaves the core to the training computation. (The watchdog reports
  // a round that never completes.)
  void BitAndAllreduce(std::vector<uint64_t>* bits, bool has_work);
  void BitOrAllreduce(std::vector<uint64_t>* bits);
  // Rank 0 receives every rank's blob (index = rank); others get an empty vector.
  std::vector<std::string> GatherToRoot(const std::string& blob);
  void BroadcastFromRoot(std::string* blob);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL, raw_comm_ = MPI_COMM_NULL;
  MPI_Comm local_comm_ = MPI_COMM_NULL, cross_comm_ = MPI_COMM_NULL;
  bool we_initialized_ = false;
};

}  // namespace hvd
