// The transport seam: everything the collectives (ops/), the controller and the engine may ask of
// the network. Nothing above this floor names MPI or a socket. Implementations, one folder each:
//   mpi/     MPI under mpirun (or an adopted mpi4py communicator): today's behaviour;
//   tcp/     sockets between ranks, connected from a rendezvous (torchrun, upstream's Gloo
//            variables, horovodrun --gloo, Spark tasks, Ray actors);
//   inproc/  ranks as threads of one process, for unit tests of every algorithm.
// Only the engine's background thread drives transfers (and, where ThreadsMultiple(), the
// hierarchical allreduce's second thread on another communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"

namespace hvd {

// A transfer that cannot complete because the network failed under it (a peer's process died,
// its connection broke). Collectives do not catch it: the engine fails the op with it
// (HorovodInternalError, naming the peer) and stops, as after MPI's fatal errors. MPI's own
// errors do not throw: MPI ends the job itself.
class TransportError : public std::runtime_error {
 public:
  TransportError(const std::string& what, int peer) : std::runtime_error(what), peer_(peer) {}
  int peer() const { return peer_; }  // the world rank of the peer, -1 if unknown

 private:
  int peer_;
};

// One posted transfer. What `handle` means belongs to the implementation (MPI: the MPI_Request's
// bits); a default-constructed Transfer is complete, and waits leave completed ones so.
struct Transfer {
  void* handle = nullptr;
};

// The waits' policy, shared by every implementation (transport.cc). A data wait polls for
// SetDataWaitSpin()'s time (HOROVOD_DATA_WAIT_SPIN_US, set by the engine at init), which covers a
// chunk on shared memory, then tests between naps of 10 to 100 us: at most 100 us late on a wait
// already that long, and TCP keeps moving meanwhile (socket buffers hold milliseconds of data).
void SetDataWaitSpin(int64_t us);
int64_t DataWaitSpin();
// The engine's thread shares its core with the caller's (engine.cc, SharesCore): every poll of a
// wait's spin (rounds and transfers) yields first, so a training thread computing on that core is
// not slowed by a peer's lateness.
void SetSpinYields(bool yields);
class Comm;
// Polls `test` until it reports done: spins for `spin_us`, then naps between tests from 10 us
// doubling up to `max_nap_us` (through `napper`'s Nap where given, so it can wake on data).
void PollUntil(const std::function<bool()>& test, int64_t spin_us, long max_nap_us,
               Comm* napper = nullptr);

constexpr size_t kMaxMessageBytes = size_t(1) << 30;

// A communicator: `size` ranks that exchange point-to-point messages. The global set's, a host's
// ranks (local), one rank per host (cross), and each process set's are all Comms.
class Comm {
 public:
  virtual ~Comm() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Nonblocking point-to-point of `bytes` bytes with rank `peer` of this Comm. Messages with one
  // (peer, tag) match in the order posted; a receive must be as large as the matching send (ops
  // always post equal sizes). Buffers must stay untouched until the transfer is waited for.
  // One message is at most kMaxMessageBytes (MPI counts are ints); callers cut larger ones.
  virtual Transfer Isend(const void* data, size_t bytes, int peer, int tag) = 0;
  virtual Transfer Irecv(void* data, size_t bytes, int peer, int tag) = 0;
  // A receive that takes a message of any length up to `capacity` bytes (0 included) and, once
  // complete, has its length in *received (which must stay valid until then). For messages of
  // unknown length: the default ExchangeRound sends each round in one message rather than a
  // length and then the bytes (a second latency). A longer message fails as in Irecv. The
  // default aborts: MPI overrides the rounds that use it.
  virtual Transfer IrecvUpTo(void* data, size_t capacity, int peer, int tag, size_t* received);
  // Completes what it can without blocking. TestAll: true once all of `t` are complete (each is
  // then default). TestAny: the index of one that completed (now default), -1 if none has yet,
  // and *all_idle = true when every entry was already default.
  virtual bool TestAll(int n, Transfer* t) = 0;
  virtual int TestAny(int n, Transfer* t, bool* all_idle) = 0;
  // Sleeps at most `us` microseconds between tests; an implementation that can wake when data
  // arrives (poll() on its sockets) does so earlier.
  virtual void Nap(long us);

  // Waits (policy above). WaitAny returns the index completed, -1 if every entry is default.
  void WaitAll(int n, Transfer* t);
  void WaitAll(std::vector<Transfer>* t) {
    WaitAll(static_cast<int>(t->size()), t->data());
    t->clear();
  }
  int WaitAny(int n, Transfer* t);
  // The controller's waits: spin `spin_us`, then naps of up to `max_nap_us`.
  void WaitAllPolling(int n, Transfer* t, int64_t spin_us, long max_nap_us);

  // Blocking collectives on small data, over the point-to-point above (transport.cc); the MPI
  // implementation overrides them with MPI's own.
  virtual void Bcast(void* data, size_t bytes, int root);
  // `all` receives size() * bytes: rank r's `mine` at r * bytes.
  virtual void Allgather(const void* mine, size_t bytes, void* all);
  // recv[r] = rank r's send[rank()].
  virtual void AlltoallInt64(const int64_t* send, int64_t* recv);
  // MPI_Allreduce (HOROVOD_CPU_OPERATIONS=mpi, the baseline); false where the transport has
  // none (the engine then runs its ring).
  virtual bool NativeAllreduce(const void* src, void* dst, size_t count, DataType dtype,
                               ReduceOp op) {
    return false;
  }
  // Whether Bcast is the transport's own (MPI_Bcast) rather than the chain over point-to-point.
  virtual bool NativeBroadcast() const { return false; }
  // Whether a second thread may drive transfers on another Comm of this transport at the same
  // time (the hierarchical allreduce's pipeline).
  virtual bool ThreadsMultiple() const { return false; }

 protected:
  int rank_ = 0, size_ = 1;
};

// Tags below kTagUserMax are the collectives' (ops/); the control rounds' are above it.
constexpr int kTagUserMax = 1 << 16;

// Where this rank sits among the ranks of its set, and the set's Comms and control rounds.
// The engine holds one for the global set and one per process set (Subset).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* Name() const = 0;  // "mpi", "tcp", "inproc"

  Comm& comm() { return *comm_; }    // control + data, background thread only
  Comm& local() { return *local_; }  // this host's ranks
  Comm& cross() { return *cross_; }  // this local rank's rank on every host, one per host
  // Beside the engine's, for the bare ring of the benchmark hook (engine.h RingAllreduceRaw).
  virtual Comm& raw() { return *comm_; }

  // The global rank of this set's rank `r` (the same number for the global set), so that every
  // message names ranks as hvd.rank() does.
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

  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool threads_multiple = false;
  bool homogeneous = true;
  int min_local_size = 1, max_local_size = 1;  // over the hosts
  // Per rank of comm(): the index of its host (hosts numbered by their lowest rank) and its local
  // rank; and the comm() ranks of cross()'s members, in order.
  std::vector<int> host_of, local_rank_of, cross_members;
  int num_hosts = 1;
  // Ranks of comm() on this rank's machine: the same kernel boot_id, so containers of one
  // machine count together where the transport sees separate hosts.
  int ranks_on_machine = 1;
  // Set before init: > 0 makes every `ranks_per_host` consecutive global ranks one "host"
  // (HOROVOD_TOPOLOGY_RANKS_PER_HOST, for tests of the hierarchical paths on one machine).
  int ranks_per_host = 0;

  // A process set's transport: `ranks` (ascending ranks of this one) as a set of their own.
  // Collective over every rank of this transport; *out stays null on non-members.
  virtual Status Subset(const std::vector<int>& ranks, std::unique_ptr<Transport>* out) = 0;
  // Releases the connections; for MPI, finalizes MPI if init initialized it.
  virtual void Finalize() = 0;
  // Ends this process and, where the transport can, the job (MPI_Abort); peers of a TCP job see
  // its connections close.
  [[noreturn]] virtual void Abort(const std::string& why) = 0;
  // What the transport reports as this machine's name (job summary, error messages).
  virtual std::string ProcessorName() const;

  // The controller's control rounds. The defaults (transport.cc) run over comm()'s
  // point-to-point; MPI overrides them with its collectives.
  // Bitwise AND of `bits` across ranks. A rank with work waiting spins a while (peers usually
  // arrive within microseconds in steady state); otherwise, and after that, it polls with short
  // sleeps so an early rank leaves the core to the training computation.
  virtual void BitAndAllreduce(std::vector<uint64_t>* bits, bool has_work);
  // Every rank's round message on every rank, in one step: `mine` goes to each peer, and each
  // peer's (at most `capacity` bytes) lands in (*all)[q] with its length in (*lens)[q];
  // (*all)[rank] is left alone. Waits as above.
  virtual void ExchangeRound(const std::vector<char>& mine, size_t capacity,
                             std::vector<std::vector<char>>* all, std::vector<size_t>* lens,
                             bool has_work);
  virtual void BitOrAllreduce(std::vector<uint64_t>* bits);
  // Rank 0 receives every rank's blob (index = rank); others get an empty vector.
  virtual std::vector<std::string> GatherToRoot(const std::string& blob);
  virtual void BroadcastFromRoot(std::string* blob);
  // Every rank's blob (index = rank), on every rank. Init only (config agreement).
  virtual std::vector<std::string> AllgatherStrings(const std::string& blob);

  // Roll call of the watchdog (its own thread): one-word notes ("blocked in section s", "working
  // in section s"; engine/watchdog.h) between ranks, where the transport has a channel for them
  // that needs nothing of the engine's thread: MPI's own communicator, TCP's UDP sockets
  // (tcp/roll_call_udp.h). Only the global set's transport has one. Best effort: a lost note
  // makes a peer look silent in one report, never blocks or fails anything.
  virtual bool roll_call_available() const { return false; }
  virtual void SendNote(int to, int64_t word) {}  // to < 0: every peer
  // Appends (sender, word) for every note that has arrived.
  virtual void PollNotes(std::vector<std::pair<int, int64_t>>* notes) {}
  // Every rank arrives within `timeout_us`: "", else what was waited for.
  virtual std::string BarrierWithin(int64_t timeout_us);

  // End-of-job summary. CreateSummaryComm is collective: called only once every rank knows the
  // summary is on. GatherRecordsToRoot gathers `bytes` from every rank into `all` at rank 0
  // (index = rank; others get nothing) without waiting more than `timeout_us`: "" on success,
  // else why it gave up ("not every rank answered within 10 s").
  virtual void CreateSummaryComm() {}
  virtual std::string GatherRecordsToRoot(const void* record, size_t bytes, int64_t timeout_us,
                                          std::vector<char>* all);

 protected:
  // A Comm of `members` (ascending ranks of comm(), this rank among them), on the same
  // connections as comm() but with messages of its own. Only the members call it, all of them
  // with the same list and `purpose` (which tells apart Comms of the same members).
  virtual std::unique_ptr<Comm> SubComm(const std::vector<int>& members, int purpose) = 0;
  // Fills the topology fields above from every rank's (host key, local rank) on comm():
  // hosts are told apart by `host_key` (equal keys: one host), or by ranks_per_host when set.
  // Collective over comm(). Implementations without a native split (tcp, inproc) use it.
  void TopologyFromHostKeys(const std::string& host_key);

  std::unique_ptr<Comm> comm_, local_, cross_;
};

// Reserved tags of the default control rounds and the small collectives (transport.cc).
constexpr int kTagBcast = kTagUserMax + 1;
constexpr int kTagAllgather = kTagUserMax + 2;
constexpr int kTagAlltoall = kTagUserMax + 3;
constexpr int kTagRound = kTagUserMax + 4;
constexpr int kTagGather = kTagUserMax + 5;
constexpr int kTagBarrier = kTagUserMax + 6;
constexpr int kTagSummary = kTagUserMax + 7;

}  // namespace hvd
