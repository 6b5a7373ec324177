// MPI setup: initialize MPI (or adopt a communicator), derive the node-local and cross-node
// communicators, and provide the controller's transport (bit-vector allreduce, request gather,
// response broadcast). Only the background thread calls these after Init.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"

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

// Waits for the transfers of a collective. MPI_Waitall spins on the core for the whole wait; a
// rank whose data comes over a slow link, or from a peer still computing, then burns a core that
// its peers on the same machine (or the training step) need. These poll for
// SetDataWaitSpin()'s time (HOROVOD_DATA_WAIT_SPIN_US, set by the engine at init), which covers a
// chunk on shared memory, then test between naps of 10 to 100 us: at most 100 us late on a
// wait already that long, and TCP keeps moving meanwhile (the kernel's socket buffers hold
// milliseconds of data). WaitAnyData returns the index completed, as MPI_Waitany.
void SetDataWaitSpin(int64_t us);
// The engine's thread shares its core with the caller's (engine.cc, SharesCore): every poll of
// a wait's spin (rounds and transfers) yields first, so a training thread computing on that core
// is not slowed by a peer's lateness.
void SetSpinYields(bool yields);
void WaitAllData(int n, MPI_Request* reqs);
int WaitAnyData(int n, MPI_Request* reqs);

class MpiContext {
 public:
  // comm == MPI_COMM_NULL: use MPI_COMM_WORLD. MPI is initialized here if nobody did yet.
  Status Init(MPI_Comm comm, bool threads_disable);
  // A process set's context (engine.cc): adopts `comm`, made by MPI_Comm_create over the
  // parent's communicator, whose members are the parent's ranks `world` in order. No roll call
  // and no summary communicator: the global set's serve the whole process.
  Status InitSubset(MPI_Comm comm, std::vector<int> world);
  // Frees communicators; finalizes MPI only if Init initialized it.
  void Finalize();
  // The global rank of this communicator's rank `r` (the same number for the global set), so
  // that every message names ranks as hvd.rank() does.
  int WorldRank(int r) const {
    return world_ranks.empty() || r < 0 || r >= static_cast<int>(world_ranks.size())
               ? r
               : world_ranks[r];
  }
  std::vector<int> WorldRanks(std::vector<int> ranks) const {
    for (int& r : ranks) r = WorldRank(r);
    return ranks;
  }
  std::vector<int> world_ranks;  // empty for the global set

  MPI_Comm comm() const { return comm_; }          // control + data, background thread only
  MPI_Comm raw_comm() const { return raw_comm_; }  // for diagnostics/benchmarks of the bare ring
  // This host's ranks, and the ranks of this local rank on every host (one per host when the
  // hosts are homogeneous): the two levels of the hierarchical collectives.
  MPI_Comm local_comm() const { return local_comm_; }
  MPI_Comm cross_comm() const { return cross_comm_; }
  // Set before Init/InitSubset: > 0 makes every `ranks_per_host` consecutive global ranks one
  // "host" (HOROVOD_TOPOLOGY_RANKS_PER_HOST, for tests of the hierarchical paths on one
  // machine); 0 takes the hosts MPI sees (shared memory).
  int ranks_per_host = 0;
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool threads_multiple = false;
  bool homogeneous = true;
  int min_local_size = 1, max_local_size = 1;  // over the hosts
  // Per rank of comm(): the index of its host (hosts numbered by their lowest rank) and its
  // local rank; and the comm() ranks of cross_comm()'s members, in order.
  std::vector<int> host_of, local_rank_of, cross_members;
  int num_hosts = 1;
  // Ranks of comm_ on this rank's machine: the same kernel boot_id, so containers of one
  // machine count together where MPI sees separate hosts.
  int ranks_on_machine = 1;

  // Controller transport.
  // Bitwise AND of `bits` across ranks. A rank with work waiting spins a while (peers usually
  // arrive within microseconds in steady state); otherwise, and after that, it polls with short
  // sleeps so an early rank leaves the core to the training computation. (The watchdog reports
  // a round that never completes.)
  void BitAndAllreduce(std::vector<uint64_t>* bits, bool has_work);
  // Every rank's round message on every rank, in one step: `mine` goes to each peer, and each
  // peer's (at most `capacity` bytes) lands in (*all)[q] with its length in (*lens)[q];
  // (*all)[rank] is left alone. n-1 messages each way where an allreduce takes log2(n) steps,
  // so the controller uses it for few ranks only (its eager allreduces). Waits as above.
  void ExchangeRound(const std::vector<char>& mine, size_t capacity,
                     std::vector<std::vector<char>>* all, std::vector<size_t>* lens, bool has_work);
  void BitOrAllreduce(std::vector<uint64_t>* bits);
  // Rank 0 receives every rank's blob (index = rank); others get an empty vector.
  std::vector<std::string> GatherToRoot(const std::string& blob);
  void BroadcastFromRoot(std::string* blob);
  // Every rank's blob (index = rank), on every rank. Init only (config agreement).
  std::vector<std::string> AllgatherStrings(const std::string& blob);

  // Roll call of the watchdog (its own thread, so only with MPI_THREAD_MULTIPLE), on a
  // communicator of its own whose errors are ignored: one-word notes ("blocked in section s",
  // "working in section s"; engine/watchdog.h) between ranks.
  bool roll_call_available() const { return diag_comm_ != MPI_COMM_NULL; }
  void SendNote(int to, int64_t word);  // to < 0: every peer
  // Appends (sender, word) for every note that has arrived.
  void PollNotes(std::vector<std::pair<int, int64_t>>* notes);
  // Every rank of the communicator arrives within `timeout_us`: "" , else what was waited for.
  std::string BarrierWithin(int64_t timeout_us);

  // End-of-job summary, on a communicator of its own so that its gather cannot match any of the
  // engine's traffic. Collective: create it only once every rank knows the summary is on.
  void CreateSummaryComm();
  // Gathers `bytes` bytes from every rank into `all` at rank 0 (index = rank; others get
  // nothing) without waiting more than `timeout_us`. "" on success, else why it gave up
  // ("not every rank answered within 10 s").
  std::string GatherRecordsToRoot(const void* record, size_t bytes, int64_t timeout_us,
                                  std::vector<char>* all);
  std::string ProcessorName() const;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL, raw_comm_ = MPI_COMM_NULL;
  MPI_Comm local_comm_ = MPI_COMM_NULL, cross_comm_ = MPI_COMM_NULL;
  MPI_Comm diag_comm_ = MPI_COMM_NULL;
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
  // local/cross communicators and ranks, and homogeneity, from comm_ (collective over it).
  void DeriveTopology();
};

}  // namespace hvd
