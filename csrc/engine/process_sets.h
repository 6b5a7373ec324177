// Process sets (upstream's hvd.ProcessSet): subsets of the global ranks that run collectives
// among themselves. Each set a rank belongs to has what the global set has: a communicator,
// a tensor queue, a controller (negotiation, response cache, fusion, stall inspector) and the
// operations, so that ops of different sets never fuse together and run concurrently on
// disjoint ranks.
//
// Why one background thread runs every set's rounds instead of a thread per set: the global
// round each cycle keeps every rank in step, then each rank runs one round of each set it is in,
// in id order. Set rounds are collectives over the set's members only; because every member runs
// the same number of them, in the same order, no two sets can wait on each other.
//
// Adding and removing a set is itself negotiated on the global set (OpType ADD_PROCESS_SET,
// REMOVE_PROCESS_SET), so every rank changes its table at the same point of the same round:
// the engine's loop applies the change (runtime_changes.cc), and every rank reaches the same
// verdict from the same table.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "engine/controller.h"
#include "engine/operations.h"
#include "engine/tensor_queue.h"
#include "engine/timeline.h"
#include "transport/transport.h"

namespace hvd {

struct ProcessSet {
  int32_t id = 0;
  std::vector<int> ranks;  // global ranks, ascending
  int rank = -1;           // this process's rank in the set; -1: not a member
  // Members only (the rest are null or unused).
  std::unique_ptr<Transport> net;
  TensorQueue queue;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<Operations> ops;
};

class ProcessSetTable {
 public:
  // Any thread. Null if there is no such set (never added, or removed).
  std::shared_ptr<ProcessSet> Find(int32_t id) const;
  // Any thread: every set, members or not, by id (not the global set).
  std::vector<std::shared_ptr<ProcessSet>> All() const;
  // Background thread: the sets this rank runs rounds for, by id.
  std::vector<std::shared_ptr<ProcessSet>> Memberships() const;

  // Background thread, on every rank in the same round (a negotiated change). Add is collective
  // over `global`'s ranks (Transport::Subset), then the members' topology.
  Status Add(const std::vector<int>& ranks, Transport* global, const Config& config,
             Timeline* timeline, int32_t* id);
  // Fails the set's pending ops with `why` and frees its communicator.
  Status Remove(int32_t id, const std::string& why);
  void FailAll(const Status& status);
  // Frees every set's communicators; before the global transport's Finalize.
  void Clear();

 private:
  mutable std::mutex mu_;  // guards sets_ (user threads look sets up while the loop changes them)
  std::map<int32_t, std::shared_ptr<ProcessSet>> sets_;
  int32_t next_id_ = 1;  // ids are never reused, so a removed set's id cannot reach another set
};

// Init's check of hvd.init(process_sets=...): `lists` holds each rank's description of its list
// (an allgather); "" when they are all equal, else the mismatch naming each side.
std::string InitialSetsMismatch(const std::vector<std::string>& lists);

}  // namespace hvd
