// The engine's public C++ API, used by every frontend (pybind11 module, TensorFlow kernels).
// One engine per process: one background thread, one MPI context.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "common/common.h"
#include "common/config.h"
#include "common/tensor_queue.h"

namespace hvd {

struct Topology {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool mpi_threads_multiple = false, homogeneous = true;
};

// Starts the engine on `comm` (MPI_COMM_NULL: MPI_COMM_WORLD); initializes MPI if needed.
// Idempotent while running.
Status Init(MPI_Comm comm);
// Negotiates shutdown with the other ranks (their pending ops fail, naming this rank), stops
// the background thread, and finalizes MPI if Init initialized it. Every rank's background
// thread ends in the same final round; with HOROVOD_SUMMARY > 0 rank 0 then gathers every
// rank's counters (waiting at most 10 s) and prints the communication summary to stderr.
void Shutdown();
bool IsInitialized();
Topology GetTopology();
const Config& GetConfig();
// Validates locally, then queues the entries atomically (all or none). Each entry's done()
// runs exactly once, on the background thread, with OK or a named error.
Status Enqueue(std::vector<TensorEntry> entries);
// A communicator beside the engine's, for benchmarking the bare ring from a frontend.
MPI_Comm RawComm();

}  // namespace hvd
