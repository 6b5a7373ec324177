// What user threads change while the job runs: process sets added and removed (negotiated on
// the global set like an op) and the timeline started and stopped (applied between rounds).
// Each change has two halves here: the call a user thread makes and waits in, and what the
// background thread does with it.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/logging.h"
#include "engine/engine_state.h"

namespace hvd {
namespace engine_internal {

void ApplyTimelineRequest(Engine* e) {
  if (e->timeline_requested.load() == e->timeline_applied) return;
  std::lock_guard<std::mutex> lk(e->timeline_mu);
  e->timeline.Shutdown();
  e->timeline_status = Status();
  if (!e->timeline_path.empty())
    e->timeline_status = e->timeline.Init(e->timeline_path, e->timeline_mark_cycles);
  e->timeline_applied = e->timeline_requested.load();
  e->timeline_cv.notify_all();
}

// The rank that asked gets the verdict (the set's id, written to its output).
void ApplyProcessSetChange(Engine* e, const Response& r) {
  TensorEntry entry;
  const bool local = e->queue.Take(r.names[0], &entry);
  int32_t id = r.root;
  Status s;
  if (r.type == OpType::ADD_PROCESS_SET) {
    std::vector<int> ranks(r.first_dims.begin(), r.first_dims.end());
    s = e->sets.Add(ranks, e->net.get(), e->config, &e->timeline, &id);
    if (s.ok()) HVD_LOG(DEBUG, "process set " << id << " added: ranks " << RankList(ranks));
  } else {
    s = e->sets.Remove(id, "process set " + std::to_string(id) +
                               " was removed (hvd.remove_process_set) while this op waited");
  }
  if (!local) return;
  if (s.ok() && entry.output) std::memcpy(entry.output, &id, sizeof(id));
  entry.done(s);
}

namespace {

// A start (path) or stop (empty path) request, waited for; see engine.h.
Status RequestTimeline(const std::string& path, bool mark_cycles) {
  Engine* e = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_running)
      return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
    e = g_engine;
  }
  if (e->net->rank != 0) return Status();
  std::unique_lock<std::mutex> lk(e->timeline_mu);
  e->timeline_path = path;
  e->timeline_mark_cycles = mark_cycles;
  const uint64_t mine = ++e->timeline_requested;
  e->queue.Wake();
  if (!e->timeline_cv.wait_for(lk, std::chrono::seconds(10),
                               [&] { return e->timeline_applied >= mine; }))
    return Status();
  return e->timeline_status;
}

// An add or remove, queued on the global set like an op and waited for. Named by a counter
// that every rank advances alike, so that a rank adding while another removes is a mismatch
// of operations, named, instead of two tensors waiting for each other.
Status ChangeProcessSets(OpType type, std::vector<int64_t> ranks, int32_t id, std::string invalid,
                         int32_t* result) {
  Engine* e = g_engine;
  if (!e || !e->controller)
    return Status::InvalidArgument("Horovod has not been initialized; use hvd.init().");
  std::vector<TensorEntry> entries(1);
  TensorEntry& en = entries[0];
  Request& r = en.request;
  r.type = type;
  r.name = "horovod.process_set_change." + std::to_string(e->set_changes++);
  r.dtype = DataType::INT32;
  r.shape = {1};
  r.splits = std::move(ranks);
  r.root = id;
  r.rank = e->topo.rank;
  r.invalid = std::move(invalid);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  int32_t out = -1;
  en.output = &out;
  en.done = [&](const Status& st) {
    std::lock_guard<std::mutex> lk(mu);
    status = st;
    done = true;
    cv.notify_all();
  };
  Status s = e->queue.Add(std::move(entries));
  if (!s.ok()) return s;
  // Bounded by the engine itself: every pending op fails at shutdown or a stall shutdown, and
  // the stall inspector names the ranks that have not made the call.
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done; });
  if (result) *result = out;
  return status;
}

}  // namespace
}  // namespace engine_internal

using engine_internal::Engine;
using engine_internal::g_engine;

Status StartTimeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) return Status::InvalidArgument("start_timeline needs a file path");
  return engine_internal::RequestTimeline(path, mark_cycles);
}

Status StopTimeline() { return engine_internal::RequestTimeline("", false); }

Status AddProcessSet(std::vector<int64_t> ranks, std::string invalid, int32_t* id) {
  std::sort(ranks.begin(), ranks.end());
  const int n = g_engine ? g_engine->topo.size : 0;
  if (!invalid.empty()) ranks.clear();  // the frontend's reason: nothing of it is used
  if (invalid.empty() && ranks.empty()) invalid = "a process set needs at least one rank";
  for (size_t i = 0; i < ranks.size() && invalid.empty(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= n)
      invalid = "process set rank " + std::to_string(ranks[i]) + " is outside [0, " +
                std::to_string(n) + ")";
    else if (i > 0 && ranks[i] == ranks[i - 1])
      invalid = "process set ranks " + ShapeString(ranks) + " name rank " +
                std::to_string(ranks[i]) + " twice";
  }
  return engine_internal::ChangeProcessSets(OpType::ADD_PROCESS_SET, std::move(ranks), 0, invalid,
                                            id);
}

Status RemoveProcessSet(int32_t id) {
  std::string invalid;
  if (id == 0) invalid = "the global process set (id 0) cannot be removed";
  return engine_internal::ChangeProcessSets(OpType::REMOVE_PROCESS_SET, {}, id, invalid, nullptr);
}

std::vector<ProcessSetInfo> ProcessSets() {
  std::vector<ProcessSetInfo> out;
  Engine* e = g_engine;
  if (!e || !e->controller) return out;
  ProcessSetInfo global;
  for (int r = 0; r < e->topo.size; ++r) global.ranks.push_back(r);
  global.rank = e->topo.rank;
  out.push_back(std::move(global));
  for (auto& set : e->sets.All()) out.push_back({set->id, set->ranks, set->rank});
  return out;
}

}  // namespace hvd
