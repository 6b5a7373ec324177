// Negotiation: decides, once per round and identically on every rank, which tensors run.
//   fast path: requests matching a cached response set a bit; one bitwise-AND allreduce of the
//              bit vector (plus three inverted status bits, so the AND computes "any rank has
//              uncached work / wants shutdown / invalidated an entry") yields the tensors ready
//              everywhere, in slot order.
//   eager:     jobs of few ranks replace that allreduce by an exchange of round messages in one
//              step: each rank's bits plus the data of its pending small allreduces (slot order,
//              up to HOROVOD_EAGER_ALLREDUCE_BYTES). A tensor ready everywhere whose data came
//              from every rank is reduced locally (Response::eager_parts), with no second trip.
//   slow path: only when some rank has uncached work or wants to shut down: requests are
//              gathered at rank 0, which checks that all ranks agree (op, dtype, shape, root,
//              reduce op, scale factors), fuses, and broadcasts the response list.
// Rank 0 also runs the stall inspector over the requests it is waiting on.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/message.h"
#include "engine/response_cache.h"
#include "engine/tensor_queue.h"
#include "engine/timeline.h"
#include "transport/transport.h"

namespace hvd {

// How the stall inspector's shutdown reason starts: the engine ends the job with MPI_Abort
// after such a shutdown instead of finalizing (background_loop.cc, EndAfterStall).
inline constexpr char kStallShutdownPrefix[] = "Horovod stall shutdown";

class Controller {
 public:
  Controller(Transport* net, const Config& config, Timeline* timeline, TensorQueue* queue);
  // One round; every rank must call it the same number of times. `proposal` (rank 0's
  // autotuner, or null): settings this round carries to every rank (ResponseList::params); the
  // new fusion threshold applies from the next round on, on every rank.
  ResponseList RunRound(bool want_shutdown, const TunedParams* proposal = nullptr);

 private:
  struct PendingHit {
    Request request;
    int64_t since_us;
  };
  struct TableEntry {               // rank 0: a tensor some ranks have submitted
    std::vector<Request> requests;  // by rank
    std::vector<bool> present;
    int count = 0;
    bool ready = false;  // listed for a response this round
    int64_t first_us = 0, last_warn_us = 0;
  };

  // RunRound's steps, in its order.
  // The queue's new requests: a cache hit waits in pending_hits_ (the fast path), anything else
  // in to_send_ (the slow path); a request that invalidates its cached slot marks the slot.
  void SortNewRequests(int64_t now);
  // This rank's bit vector for the round: word 0 the inverted status `flags`, then one bit per
  // cache slot it is ready to run (a joined rank: every cached allreduce).
  std::vector<uint64_t> ReadyBits(uint64_t flags) const;
  // The cached responses every rank is ready for (`bits`, ANDed over the ranks): the eager ones
  // (their data in `eager`, moved out) each alone, then the rest fused, in slot order.
  std::vector<Response> FastPathResponses(const std::vector<uint64_t>& bits,
                                          std::map<int, std::vector<const void*>>* eager);
  // Some rank invalidated cache slots: every rank erases the union of them, and its requests
  // waiting on those slots go the slow path.
  void EraseInvalidSlots();
  // Requests gathered at rank 0, which coordinates and broadcasts the response list (with the
  // autotuner's `proposal`); appends its responses, settings and shutdown to `out`.
  void SlowPath(bool want_shutdown, const TunedParams* proposal, ResponseList* out);
  // Caches each tensor of the negotiated `responses`, except what ran while ranks had joined:
  // those lack the entry, and every rank's cache must stay the same.
  void CacheNegotiated(const std::vector<Response>& responses);

  ResponseList Coordinate(const std::vector<std::string>& blobs);
  // Submitted by every rank that has not joined (hvd.join): joined ranks add zeros.
  bool Ready(const TableEntry& e) const;
  bool Joined(int rank) const;
  // The checked response for a tensor in the table (engine/request_checks.h).
  Response ConstructResponse(const std::string& name, const TableEntry& entry) const;
  // A group fails as a whole: rank 0 fails its waiting members (FailGroupsAtRoot), every rank
  // its own members that never reached rank 0 (cached requests; FailGroupsLocally).
  // `failed`: group -> index of the failed member's response in `responses`.
  void FailGroupsAtRoot(const std::unordered_map<std::string, size_t>& failed,
                        std::vector<Response>* responses);
  void FailGroupsLocally(const std::vector<Response>& responses, std::vector<Response>* out);
  void InspectStalls(int64_t now);
  // Eager allreduces: the bytes of the cached response in `slot` if its data may travel in the
  // round message (a non-empty CPU allreduce that reduces plainly: no Adasum, prescale or
  // widened integer average), else 0. The same on every rank: it reads only the cache.
  size_t EagerBytes(int slot) const;
  // The slots whose data a round message with bit vector `bits` carries, and their offsets in
  // its payload: set bits in slot order, each taken if it still fits in eager_bytes_. Sender
  // and receivers compute the same layout from the same bits. Returns the payload's bytes.
  size_t EagerLayout(const uint64_t* bits, std::vector<std::pair<int, size_t>>* layout) const;
  // One round's exchange with eager data: packs this rank's message, exchanges, ANDs every
  // rank's bits into `bits`, and returns the slots every rank sent data for (with pointers to it).
  std::map<int, std::vector<const void*>> EagerRound(std::vector<uint64_t>* bits, bool has_work);

  Transport* net_;
  Config config_;
  Timeline* timeline_;
  TensorQueue* queue_;
  ResponseCache cache_;
  size_t words_;              // bit-vector length: 1 status word + one bit per cache slot
  int64_t fusion_threshold_;  // the knob's value until the autotuner sends another
  std::vector<Request> to_send_;
  std::map<int, PendingHit> pending_hits_;  // ordered: fast-path responses run in slot order
  std::set<int> invalid_slots_;
  std::vector<int32_t> joined_;  // ranks in hvd.join(), as rank 0 last broadcast them
  // Eager allreduces: per-round payload limit (0: rounds are the bit-vector allreduce), this
  // rank's round message, and every rank's as received (kept: responses point into them).
  size_t eager_bytes_ = 0;
  std::vector<char> round_out_;
  std::vector<std::vector<char>> round_in_;
  std::vector<size_t> round_len_;
  // rank 0 only
  std::unordered_map<std::string, TableEntry> table_;
  std::vector<int32_t> root_joined_;  // in the order they joined; the last is join()'s answer
  int64_t next_stall_check_us_ = 0;
  std::string stall_shutdown_reason_;
};

}  // namespace hvd
