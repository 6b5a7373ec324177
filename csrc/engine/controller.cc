#include "engine/controller.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "common/logging.h"
#include "common/reduce_kernels.h"
#include "engine/fusion.h"
#include "engine/request_checks.h"
#include "engine/watchdog.h"

namespace hvd {
namespace {

// kNewParams: rank 0 sends autotuned settings this round, which needs the slow path.
constexpr uint64_t kHasUncached = 1, kWantsShutdown = 2, kHasInvalid = 4, kNewParams = 8;
// Eager rounds send n-1 messages each way (Transport::ExchangeRound) and wait for every peer's;
// above this many ranks the bit-vector allreduce's log2(n) steps cost less than the round trip
// eager data saves. Measured on 16 cores (docs/benchmarks.md): 4 KiB faster with eager at 2, 4
// and 8 ranks every time; at 10-16 slower in 3 runs of 5 (up to 10x).
constexpr int kEagerMaxRanks = 8;

inline void SetBit(std::vector<uint64_t>* v, size_t base, int slot) {
  (*v)[base + slot / 64] |= uint64_t(1) << (slot % 64);
}
inline bool TestBit(const std::vector<uint64_t>& v, size_t base, int slot) {
  return (v[base + slot / 64] >> (slot % 64)) & 1;
}

// The error response of a member of a failed group: the failure that failed the group.
Response GroupMemberFailure(const Request& member, const Response& cause) {
  Response r;
  r.spec() = member.spec();
  r.names = {member.name};
  r.num_elements = {NumElements(member.shape)};
  r.error = cause.error;
  r.error_is_invalid_argument = cause.error_is_invalid_argument;
  return r;
}

}  // namespace

Controller::Controller(Transport* net, const Config& config, Timeline* timeline, TensorQueue* queue)
    : net_(net),
      config_(config),
      timeline_(timeline),
      queue_(queue),
      fusion_threshold_(config.fusion_threshold) {
  cache_.SetCapacity(static_cast<size_t>(config.cache_capacity));
  words_ = 1 + (cache_.capacity() + 63) / 64;
  // Every rank decides alike: the knobs agree (Init) and the set's size is the same everywhere.
  if (net_->size >= 2 && net_->size <= kEagerMaxRanks && config.cpu_operations != "mpi" &&
      cache_.capacity() > 0)
    eager_bytes_ = static_cast<size_t>(config.eager_allreduce_bytes);
}

size_t Controller::EagerBytes(int slot) const {
  if (!cache_.Used(slot)) return 0;
  const Response& r = cache_.Get(slot);
  if (r.type != OpType::ALLREDUCE || r.gpu || r.reduce_op == ReduceOp::ADASUM ||
      r.prescale != 1.0 || AveragesWidened(r.dtype, r.reduce_op) || r.num_elements.size() != 1)
    return 0;
  return static_cast<size_t>(r.num_elements[0]) * DataTypeSize(r.dtype);
}

size_t Controller::EagerLayout(const uint64_t* bits,
                               std::vector<std::pair<int, size_t>>* layout) const {
  layout->clear();
  size_t used = 0;
  for (size_t w = 1; w < words_; ++w)
    for (uint64_t word = bits[w]; word; word &= word - 1) {
      const int slot = static_cast<int>((w - 1) * 64 + __builtin_ctzll(word));
      const size_t bytes = EagerBytes(slot);
      if (bytes == 0 || used + bytes > eager_bytes_) continue;
      layout->push_back({slot, used});
      used += bytes;
    }
  return used;
}

std::map<int, std::vector<const void*>> Controller::EagerRound(std::vector<uint64_t>* bits,
                                                               bool has_work) {
  const size_t head = words_ * sizeof(uint64_t);
  std::vector<std::pair<int, size_t>> mine, theirs;
  round_out_.resize(head + EagerLayout(bits->data(), &mine));
  std::memcpy(round_out_.data(), bits->data(), head);
  for (const auto& [slot, offset] : mine) {
    // In the layout only if pending here (a joined rank, which sets bits for slots it lacks,
    // never runs eager rounds), so the entry is queued.
    const TensorEntry* e = queue_->Peek(cache_.Get(slot).names[0]);
    std::memcpy(round_out_.data() + head + offset, e->input, EagerBytes(slot));
  }
  net_->ExchangeRound(round_out_, head + eager_bytes_, &round_in_, &round_len_, has_work);

  // Slots ready everywhere whose data this rank sent: candidates, with this rank's part.
  std::map<int, std::vector<const void*>> eager;
  const int n = net_->size;
  for (int q = 0; q < n; ++q) {
    if (q == net_->rank) continue;
    const uint64_t* in = reinterpret_cast<const uint64_t*>(round_in_[q].data());
    if (round_len_[q] < head) {
      HVD_LOG(ERROR, "round message of " << round_len_[q] << " bytes from rank "
                                         << net_->WorldRank(q) << ", expected at least " << head);
      net_->Abort("the round message is malformed");
    }
    for (size_t w = 0; w < words_; ++w) (*bits)[w] &= in[w];
  }
  for (const auto& [slot, offset] : mine)
    if (TestBit(*bits, 1, slot)) {
      auto& parts = eager[slot];
      parts.assign(n, nullptr);
      parts[net_->rank] = round_out_.data() + head + offset;
    }
  if (eager.empty()) return eager;
  // Keep those whose data every other rank sent too; its layout says where.
  for (int q = 0; q < n; ++q) {
    if (q == net_->rank) continue;
    const size_t sent =
        EagerLayout(reinterpret_cast<const uint64_t*>(round_in_[q].data()), &theirs);
    if (round_len_[q] != head + sent) {
      // Every rank's cache is the same, so the layouts agree; a difference is a bug that would
      // reduce the wrong bytes: stop rather than return a wrong sum.
      HVD_LOG(ERROR, "eager round message from rank "
                         << net_->WorldRank(q) << " carries " << round_len_[q] - head
                         << " bytes of data where its bits say " << sent);
      net_->Abort("the round message is malformed");
    }
    for (const auto& [slot, offset] : theirs) {
      auto it = eager.find(slot);
      if (it != eager.end()) it->second[q] = round_in_[q].data() + head + offset;
    }
  }
  for (auto it = eager.begin(); it != eager.end();) {
    const auto& parts = it->second;
    if (std::find(parts.begin(), parts.end(), nullptr) != parts.end())
      it = eager.erase(it);
    else
      ++it;
  }
  return eager;
}

ResponseList Controller::RunRound(bool want_shutdown, const TunedParams* proposal) {
  const int64_t now = NowMicros();
  SortNewRequests(now);
  // A cached tensor that waits long is demoted to the slow path, so that rank 0 sees it and the
  // stall inspector can name the ranks that never submitted it.
  const bool stall_check = !config_.stall_check_disable;
  const int64_t stall_us = static_cast<int64_t>(config_.stall_check_time_s * 1e6);
  if (stall_check)
    for (auto& kv : pending_hits_)
      if (now - kv.second.since_us > stall_us / 2) invalid_slots_.insert(kv.first);

  uint64_t flags = 0;
  if (!to_send_.empty()) flags |= kHasUncached;
  if (want_shutdown || !stall_shutdown_reason_.empty()) flags |= kWantsShutdown;
  if (!invalid_slots_.empty()) flags |= kHasInvalid;
  if (proposal) flags |= kNewParams;
  std::vector<uint64_t> bits = ReadyBits(flags);
  const bool has_work = !pending_hits_.empty() || !to_send_.empty() || want_shutdown;
  // Every rank's background thread joins a round at least once a cycle, so a round that stays
  // blocked means a peer process is stopped, dead or stuck: the watchdog reports it.
  WatchSection negotiation;
  negotiation.what = "negotiation round (all ranks' background threads must join)";
  WatchScope watch(negotiation);
  // Eager data only while no rank has joined (joined ranks add zeros through the operations);
  // every rank knows that from the same broadcast, so all switch in the same round.
  std::map<int, std::vector<const void*>> eager;
  if (eager_bytes_ > 0 && joined_.empty())
    eager = EagerRound(&bits, has_work);
  else
    net_->BitAndAllreduce(&bits, has_work);
  flags = ~bits[0];

  ResponseList out;
  out.responses = FastPathResponses(bits, &eager);
  if (flags & kHasInvalid) EraseInvalidSlots();
  invalid_slots_.clear();
  if (flags & (kHasUncached | kWantsShutdown | kNewParams)) SlowPath(want_shutdown, proposal, &out);
  if (net_->rank == 0 && stall_check) InspectStalls(NowMicros());
  return out;
}

void Controller::SortNewRequests(int64_t now) {
  for (auto& r : queue_->PopNewRequests()) {
    if (IsControlOp(r.type)) {  // never cached: rank 0 must see every join and set change
      to_send_.push_back(std::move(r));
      continue;
    }
    int slot = -1;
    auto found = cache_.Find(r, &slot);
    if (found == ResponseCache::Lookup::HIT) {
      pending_hits_[slot] = {std::move(r), now};
    } else {
      if (found == ResponseCache::Lookup::INVALID) invalid_slots_.insert(slot);
      to_send_.push_back(std::move(r));
    }
  }
}

std::vector<uint64_t> Controller::ReadyBits(uint64_t flags) const {
  std::vector<uint64_t> bits(words_, 0);
  bits[0] = ~flags;
  // A joined rank takes part in every cached allreduce the others are ready for (with zeros).
  // It knows it has joined only from rank 0's broadcast, as the others do, so all ranks switch
  // in the same round.
  if (Joined(net_->rank)) {
    for (int slot = 0; slot < static_cast<int>(cache_.capacity()); ++slot)
      if (cache_.Used(slot) && cache_.Get(slot).type == OpType::ALLREDUCE &&
          !invalid_slots_.count(slot))
        SetBit(&bits, 1, slot);
  } else {
    for (auto& kv : pending_hits_)
      if (!invalid_slots_.count(kv.first)) SetBit(&bits, 1, kv.first);
  }
  return bits;
}

std::vector<Response> Controller::FastPathResponses(
    const std::vector<uint64_t>& bits, std::map<int, std::vector<const void*>>* eager) {
  // The cached responses ready everywhere, read in place: fusion copies what it needs.
  std::vector<const Response*> fast;
  std::vector<Response> responses;  // the eager ones first
  if (Joined(net_->rank)) {
    // The same slots, in the same (slot) order, as the ranks that have them pending.
    for (int slot = 0; slot < static_cast<int>(cache_.capacity()); ++slot) {
      if (!cache_.Used(slot) || !TestBit(bits, 1, slot) || invalid_slots_.count(slot)) continue;
      fast.push_back(&cache_.Get(slot));
      cache_.Touch(slot);
      pending_hits_.erase(slot);
    }
  }
  for (auto it = pending_hits_.begin(); it != pending_hits_.end();) {
    if (!TestBit(bits, 1, it->first)) {
      ++it;
      continue;
    }
    auto parts = eager->find(it->first);
    if (parts != eager->end()) {
      // Reduced alone, before the fused ones: its data is here already.
      responses.push_back(cache_.Get(it->first));
      responses.back().eager_parts = std::move(parts->second);
    } else {
      fast.push_back(&cache_.Get(it->first));
    }
    cache_.Touch(it->first);
    if (timeline_->enabled()) {
      timeline_->NegotiateStart(it->second.request.name, it->second.request.type,
                                it->second.since_us);
      timeline_->NegotiateEnd(it->second.request.name, NowMicros());
    }
    it = pending_hits_.erase(it);
  }
  // Fused now, while the cache entries `fast` points to are as they were: the steps below may
  // erase or replace slots. Ranks that have joined contribute zeros, so Average divides by the
  // others.
  std::vector<Response> fused =
      FuseCachedResponses(fast, fusion_threshold_,
                          joined_.empty() ? -1 : net_->size - static_cast<int32_t>(joined_.size()));
  for (auto& r : fused) responses.push_back(std::move(r));
  return responses;
}

void Controller::EraseInvalidSlots() {
  std::vector<uint64_t> inv(words_, 0);
  for (int slot : invalid_slots_) SetBit(&inv, 1, slot);
  net_->BitOrAllreduce(&inv);
  for (int slot = 0; slot < static_cast<int>(cache_.capacity()); ++slot) {
    if (!TestBit(inv, 1, slot)) continue;
    auto it = pending_hits_.find(slot);
    if (it != pending_hits_.end()) {
      to_send_.push_back(std::move(it->second.request));
      pending_hits_.erase(it);
    }
    cache_.Erase(slot);
  }
}

void Controller::SlowPath(bool want_shutdown, const TunedParams* proposal, ResponseList* out) {
  RequestList mine;
  mine.requests.swap(to_send_);
  mine.shutdown = want_shutdown;
  auto blobs = net_->GatherToRoot(Encode(mine));
  std::string blob;
  if (net_->rank == 0) {
    ResponseList root = Coordinate(blobs);
    if (proposal) {
      root.has_params = true;
      root.params = *proposal;
    }
    blob = Encode(root);
  }
  net_->BroadcastFromRoot(&blob);
  ResponseList slow;
  const bool decoded = Decode(blob.data(), blob.size(), &slow);
  if (!decoded) {
    slow.shutdown = true;
    slow.shutdown_reason = "internal error: undecodable response list from rank 0";
  }
  joined_ = slow.joined;
  if (slow.has_params) {
    // Rank 0 fused this round's responses with the old threshold, as every rank fused the
    // fast path's: the new one applies from the next round on, everywhere alike.
    fusion_threshold_ = slow.params.fusion_threshold;
    out->has_params = true;
    out->params = slow.params;
  }
  // Cached identically everywhere, before it runs.
  CacheNegotiated(slow.responses);
  std::vector<Response> group_failures;
  FailGroupsLocally(slow.responses, &group_failures);
  for (auto& r : slow.responses) out->responses.push_back(std::move(r));
  for (auto& r : group_failures) out->responses.push_back(std::move(r));
  out->shutdown = slow.shutdown;
  out->shutdown_reason = std::move(slow.shutdown_reason);
  out->shutdown_on_every_rank = slow.shutdown && decoded;
}

void Controller::CacheNegotiated(const std::vector<Response>& responses) {
  for (const auto& resp : responses) {
    if (!resp.error.empty() || IsControlOp(resp.type) || resp.contributors != 0) continue;
    // One tensor's response, built from the spec: copying the fused response per name
    // would copy all its names each time (quadratic in the group size).
    Response single;
    single.spec() = resp.spec();
    single.first_dims = resp.first_dims;  // only single-tensor responses carry them
    single.names.resize(1);
    single.num_elements.resize(1);
    for (size_t i = 0; i < resp.names.size(); ++i) {
      const TensorEntry* e = queue_->Peek(resp.names[i]);
      if (!e) continue;
      single.names[0] = resp.names[i];
      single.num_elements[0] = resp.num_elements[i];
      int evicted = cache_.Put(single, e->request);
      auto it = evicted >= 0 ? pending_hits_.find(evicted) : pending_hits_.end();
      if (it != pending_hits_.end()) {
        to_send_.push_back(std::move(it->second.request));
        pending_hits_.erase(it);
      }
    }
  }
}

ResponseList Controller::Coordinate(const std::vector<std::string>& blobs) {
  const int n = net_->size;
  const int64_t now = NowMicros();
  std::vector<int> shutdown_ranks;
  std::vector<std::string> ready;
  for (int r = 0; r < n; ++r) {
    RequestList rl;
    if (!Decode(blobs[r].data(), blobs[r].size(), &rl)) {
      HVD_LOG(ERROR, "undecodable request list from rank " << r);
      shutdown_ranks.push_back(r);
      continue;
    }
    if (rl.shutdown) shutdown_ranks.push_back(r);
    for (auto& req : rl.requests) {
      TableEntry& e = table_[req.name];
      if (e.requests.empty()) {
        e.requests.resize(n);
        e.present.assign(n, false);
        e.first_us = now;
        timeline_->NegotiateStart(req.name, req.type, now);
      }
      if (e.present[r]) continue;
      e.present[r] = true;
      ++e.count;
      if (req.type == OpType::JOIN) root_joined_.push_back(r);  // once: present[r] was false
      e.requests[r] = std::move(req);
      timeline_->NegotiateRankReady(e.requests[r].name, r, now);
      if (!e.ready && Ready(e)) {
        e.ready = true;
        ready.push_back(e.requests[r].name);
      }
    }
  }
  // A rank joined: tensors that waited only for joined ranks are ready now.
  if (!root_joined_.empty())
    for (auto& kv : table_)
      if (!kv.second.ready && Ready(kv.second)) {
        kv.second.ready = true;
        ready.push_back(kv.first);
      }
  ResponseList out;
  std::vector<Response> responses;
  std::unordered_map<std::string, size_t> failed_groups;
  for (const auto& name : ready) {
    const TableEntry& entry = table_[name];
    responses.push_back(ConstructResponse(name, entry));
    if (!responses.back().error.empty())
      for (const auto& req : entry.requests)
        if (!req.group.empty()) failed_groups.emplace(req.group, responses.size() - 1);
    timeline_->NegotiateEnd(name, now);
    table_.erase(name);
  }
  if (!failed_groups.empty()) FailGroupsAtRoot(failed_groups, &responses);
  // Every rank has joined: join() returns on all of them, and the job goes on without joiners.
  for (const auto& r : responses)
    if (r.type == OpType::JOIN && r.error.empty()) root_joined_.clear();
  out.joined = root_joined_;
  out.responses = FuseResponses(std::move(responses), fusion_threshold_);
  if (!shutdown_ranks.empty()) {
    out.shutdown = true;
    out.shutdown_reason = "Horovod has been shut down: rank" +
                          std::string(shutdown_ranks.size() > 1 ? "s " : " ") +
                          RankList(net_->WorldRanks(shutdown_ranks)) +
                          " called shutdown() or exited; ops that were still pending fail";
  } else if (!stall_shutdown_reason_.empty()) {
    out.shutdown = true;
    out.shutdown_reason = stall_shutdown_reason_;
  }
  return out;
}

Response Controller::ConstructResponse(const std::string& name, const TableEntry& entry) const {
  if (entry.count == net_->size)
    return ResponseFromRequests(*net_, name, entry.requests,
                                root_joined_.empty() ? 0 : root_joined_.back());
  std::vector<int> joined;
  for (int r : root_joined_)
    if (!entry.present[r]) joined.push_back(r);
  return ResponseWithJoinedRanks(*net_, name, entry.requests, entry.present, joined);
}

void Controller::FailGroupsAtRoot(const std::unordered_map<std::string, size_t>& failed,
                                  std::vector<Response>* responses) {
  // Members some ranks submitted but others did not (a larger group on those ranks, or the
  // rest of a group whose member failed) would wait for ever: they fail with the member's error.
  std::vector<Response> extra;
  const int64_t now = NowMicros();
  for (auto it = table_.begin(); it != table_.end();) {
    const TableEntry& e = it->second;
    const Request* member = nullptr;
    for (int r = 0; r < net_->size && !member; ++r)
      if (e.present[r] && !e.requests[r].group.empty()) member = &e.requests[r];
    auto f = member ? failed.find(member->group) : failed.end();
    if (f == failed.end()) {
      ++it;
      continue;
    }
    extra.push_back(GroupMemberFailure(*member, (*responses)[f->second]));
    timeline_->NegotiateEnd(it->first, now);
    it = table_.erase(it);
  }
  for (auto& r : extra) responses->push_back(std::move(r));
}

void Controller::FailGroupsLocally(const std::vector<Response>& responses,
                                   std::vector<Response>* out) {
  std::unordered_map<std::string, const Response*> failed;
  for (const auto& resp : responses) {
    if (resp.error.empty()) continue;
    for (const auto& n : resp.names) {
      const TensorEntry* e = queue_->Peek(n);
      if (e && !e->request.group.empty()) failed.emplace(e->request.group, &resp);
    }
  }
  if (failed.empty()) return;
  // Identical on every rank holding the members: they are cached requests, or requests the
  // cache evicted this round (to_send_), and the cache is the same everywhere.
  for (auto it = pending_hits_.begin(); it != pending_hits_.end();) {
    auto f = failed.find(it->second.request.group);
    if (it->second.request.group.empty() || f == failed.end()) {
      ++it;
      continue;
    }
    out->push_back(GroupMemberFailure(it->second.request, *f->second));
    it = pending_hits_.erase(it);
  }
  for (auto it = to_send_.begin(); it != to_send_.end();) {
    auto f = it->group.empty() ? failed.end() : failed.find(it->group);
    if (f == failed.end()) {
      ++it;
      continue;
    }
    out->push_back(GroupMemberFailure(*it, *f->second));
    it = to_send_.erase(it);
  }
}

bool Controller::Joined(int rank) const {
  return std::find(joined_.begin(), joined_.end(), rank) != joined_.end();
}

bool Controller::Ready(const TableEntry& e) const {
  int absent_joined = 0;
  for (int r : root_joined_)
    if (!e.present[r]) ++absent_joined;
  return e.count + absent_joined == net_->size;
}

void Controller::InspectStalls(int64_t now) {
  if (now < next_stall_check_us_ || table_.empty()) return;
  next_stall_check_us_ = now + 1000000;  // at most once a second
  const int64_t warn_us = static_cast<int64_t>(config_.stall_check_time_s * 1e6);
  const int64_t shutdown_us = static_cast<int64_t>(config_.stall_shutdown_time_s * 1e6);
  std::ostringstream report;
  int stalled = 0;
  for (auto& kv : table_) {
    TableEntry& e = kv.second;
    const int64_t waited = now - e.first_us;
    if (waited < warn_us) continue;
    std::vector<int> missing, submitted;
    for (int r = 0; r < net_->size; ++r)
      if (e.present[r] ||
          std::find(root_joined_.begin(), root_joined_.end(), r) == root_joined_.end())
        (e.present[r] ? submitted : missing).push_back(r);
    std::ostringstream line;
    line << "tensor '" << kv.first << "' (" << OpTypeName(e.requests[submitted[0]].type)
         << ") has waited " << waited / 1000000 << " s for rank"
         << (missing.size() > 1 ? "s " : " ") << RankList(net_->WorldRanks(missing))
         << " (submitted by " << RankList(net_->WorldRanks(submitted)) << ")";
    if (shutdown_us > 0 && waited >= shutdown_us && stall_shutdown_reason_.empty()) {
      std::ostringstream reason;
      reason << kStallShutdownPrefix
             << " (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" << config_.stall_shutdown_time_s
             << "): " << line.str();
      stall_shutdown_reason_ = reason.str();
    }
    if (now - e.last_warn_us >= warn_us) {
      e.last_warn_us = now;
      report << "\n  " << line.str();
      ++stalled;
    }
  }
  if (stalled)
    HVD_LOG(WARNING, "Stall inspector: "
                         << stalled
                         << " tensor(s) submitted by some ranks are "
                            "waiting for the others for more than "
                         << config_.stall_check_time_s
                         << " s. The missing ranks may be on another code path, stuck, or dead:"
                         << report.str());
}

}  // namespace hvd
