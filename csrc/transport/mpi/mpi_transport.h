// The MPI transport: initializes MPI (or adopts a communicator), derives the node-local and
// cross-node communicators with MPI's own splits, and runs the controller's rounds and the small
// collectives as MPI collectives. The default under mpirun; the only code that includes <mpi.h>.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"
#include "transport/transport.h"

#define HVD_MPI_CHECK(call)                                                                  \
  do {                                                                                       \
    int hvd_mpi_rc_ = (call);                                                                \
    if (hvd_mpi_rc_ != MPI_SUCCESS) ::hvd::MpiFatal(#call, hvd_mpi_rc_, __FILE__, __LINE__); \
  } while (0)

namespace hvd {

[[noreturn]] void MpiFatal(const char* call, int rc, const char* file, int line);
MPI_Datatype MpiDataType(DataType t);  // MPI_UINT16_T for float16/bfloat16
// MPI_Op for MPI_Allreduce on `t`; float16/bfloat16 get user-defined ops reducing in float32.
MPI_Op MpiReduceOp(DataType t, ReduceOp op);
std::string MpiLibraryVersion();  // callable before MPI_Init
// Whether this process was started by an MPI launcher (Open MPI's, MPICH's/Hydra's, Slurm's PMI
// environment): hvd.init() then chooses this transport.
bool MpiLauncherPresent();

// A Comm over an MPI communicator: a Transfer's handle holds the MPI_Request's bits.
class MpiComm : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool threads_multiple);
  MPI_Comm mpi() const { return comm_; }
  Transfer Isend(const void* data, size_t bytes, int peer, int tag) override;
  Transfer Irecv(void* data, size_t bytes, int peer, int tag) override;
  bool TestAll(int n, Transfer* t) override;
  int TestAny(int n, Transfer* t, bool* all_idle) override;
  void Bcast(void* data, size_t bytes, int root) override;
  void Allgather(const void* mine, size_t bytes, void* all) override;
  void AlltoallInt64(const int64_t* send, int64_t* recv) override;
  // MPI_Allreduce: Open MPI's `coll tuned` picks the algorithm (recursive doubling for small,
  // ring/Rabenseifner for large buffers); it allocates a message-sized temporary per call, which
  // our persistent-buffer ring avoids. Kept selectable (HOROVOD_CPU_OPERATIONS=mpi) as the
  // reference the benchmarks compare against.
  bool NativeAllreduce(const void* src, void* dst, size_t count, DataType dtype,
                       ReduceOp op) override;
  bool NativeBroadcast() const override { return true; }
  bool ThreadsMultiple() const override { return threads_multiple_; }

 private:
  MPI_Comm comm_;
  bool threads_multiple_;
};

class MpiTransport : public Transport {
 public:
  ~MpiTransport() override;
  const char* Name() const override { return "mpi"; }
  // comm == MPI_COMM_NULL: use MPI_COMM_WORLD. MPI is initialized here if nobody did yet.
  Status Init(MPI_Comm comm, bool threads_disable);
  // The global set's communicator (init(comm=...) compares against it).
  MPI_Comm mpi_comm() const { return mpi_comm_; }
  Comm& raw() override { return *raw_; }
  Status Subset(const std::vector<int>& ranks, std::unique_ptr<Transport>* out) override;
  // Frees communicators; finalizes MPI only if Init initialized it.
  void Finalize() override;
  [[noreturn]] void Abort(const std::string& why) override;
  std::string ProcessorName() const override;

  void BitAndAllreduce(std::vector<uint64_t>* bits, bool has_work) override;
  void ExchangeRound(const std::vector<char>& mine, size_t capacity,
                     std::vector<std::vector<char>>* all, std::vector<size_t>* lens,
                     bool has_work) override;
  void BitOrAllreduce(std::vector<uint64_t>* bits) override;
  std::vector<std::string> GatherToRoot(const std::string& blob) override;
  void BroadcastFromRoot(std::string* blob) override;
  std::vector<std::string> AllgatherStrings(const std::string& blob) override;

  // The watchdog's roll call runs on its own thread, so only with MPI_THREAD_MULTIPLE, on a
  // communicator of its own whose errors are ignored.
  bool roll_call_available() const override { return diag_comm_ != MPI_COMM_NULL; }
  void SendNote(int to, int64_t word) override;
  void PollNotes(std::vector<std::pair<int, int64_t>>* notes) override;
  std::string BarrierWithin(int64_t timeout_us) override;
  // On a communicator of its own, so that its gather cannot match any of the engine's traffic.
  void CreateSummaryComm() override;
  std::string GatherRecordsToRoot(const void* record, size_t bytes, int64_t timeout_us,
                                  std::vector<char>* all) override;

 protected:
  std::unique_ptr<Comm> SubComm(const std::vector<int>& members, int purpose) override;

 private:
  // A process set's transport: adopts `comm`, made by MPI_Comm_create over the parent's
  // communicator, whose members are the parent's ranks `world` in order. No roll call and no
  // summary communicator: the global set's serve the whole process.
  Status InitSubset(MPI_Comm comm, std::vector<int> world);
  // local/cross communicators and ranks, and homogeneity, from mpi_comm_ (collective over it).
  void DeriveTopology();
  void MakeComms();

  MPI_Comm mpi_comm_ = MPI_COMM_NULL, raw_comm_ = MPI_COMM_NULL;
  MPI_Comm local_comm_ = MPI_COMM_NULL, cross_comm_ = MPI_COMM_NULL;
  MPI_Comm diag_comm_ = MPI_COMM_NULL;
  std::unique_ptr<Comm> raw_;
  std::vector<MPI_Comm> sub_comms_;  // SubComm's, freed at Finalize
  struct NoteSend {
    std::unique_ptr<int64_t> word;  // the Isend's buffer: lives until the send completes
    MPI_Request req;
  };
  std::vector<NoteSend> notes_out_;
  MPI_Comm summary_comm_ = MPI_COMM_NULL;
  // The summary gather's buffers: a gather given up on may still complete later (a nonblocking
  // collective cannot be cancelled), so they outlive it.
  std::vector<char> summary_send_, summary_recv_;
  bool we_initialized_ = false;
  bool finalized_ = false;
};

}  // namespace hvd
