#include "engine/process_sets.h"

#include <sstream>

#include "common/logging.h"

namespace hvd {

std::shared_ptr<ProcessSet> ProcessSetTable::Find(int32_t id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ProcessSet>> ProcessSetTable::All() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::shared_ptr<ProcessSet>> out;
  for (const auto& kv : sets_) out.push_back(kv.second);
  return out;
}

std::vector<std::shared_ptr<ProcessSet>> ProcessSetTable::Memberships() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::shared_ptr<ProcessSet>> out;
  for (const auto& kv : sets_)
    if (kv.second->rank >= 0) out.push_back(kv.second);
  return out;
}

Status ProcessSetTable::Add(const std::vector<int>& ranks, Transport* global, const Config& config,
                            Timeline* timeline, int32_t* id) {
  // The frontend checked the ranks (runtime_changes.cc, AddProcessSet); the negotiation that every
  // rank names the same ones. What is left depends on the table, the same on every rank.
  if (static_cast<int>(ranks.size()) == global->size)
    return Status::InvalidArgument("process set " + RankList(ranks) +
                                   " holds every rank: that is the global process set (id 0)");
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& kv : sets_)
      if (kv.second->ranks == ranks)
        return Status::InvalidArgument("a process set of ranks " + RankList(ranks) +
                                       " already exists (id " + std::to_string(kv.first) + ")");
  }
  auto set = std::make_shared<ProcessSet>();
  set->ranks = ranks;
  // Collective over every rank of the global set; members get the set's transport.
  Status s = global->Subset(ranks, &set->net);
  if (!s.ok()) return s;
  if (set->net) {
    set->rank = set->net->rank;
    set->controller = std::make_unique<Controller>(set->net.get(), config, timeline, &set->queue);
    set->ops = std::make_unique<Operations>(set->net.get(), config, timeline, &set->queue);
  }
  std::lock_guard<std::mutex> lk(mu_);
  set->id = *id = next_id_++;
  sets_[set->id] = std::move(set);
  return Status();
}

Status ProcessSetTable::Remove(int32_t id, const std::string& why) {
  std::shared_ptr<ProcessSet> set;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = sets_.find(id);
    if (it == sets_.end())
      return Status::InvalidArgument("there is no process set with id " + std::to_string(id) +
                                     " (never added, or already removed)");
    set = std::move(it->second);
    sets_.erase(it);
  }
  set->queue.FailAll(Status::InvalidArgument(why));
  set->ops.reset();
  set->controller.reset();
  if (set->net) set->net->Finalize();  // frees its communicators only
  return Status();
}

void ProcessSetTable::FailAll(const Status& status) {
  for (auto& set : All()) set->queue.FailAll(status);
}

void ProcessSetTable::Clear() {
  std::map<int32_t, std::shared_ptr<ProcessSet>> sets;
  {
    std::lock_guard<std::mutex> lk(mu_);
    sets.swap(sets_);
  }
  for (auto& kv : sets) {
    kv.second->ops.reset();
    kv.second->controller.reset();
    if (kv.second->net) kv.second->net->Finalize();
  }
}

// hvd.init(process_sets=...) must get the same list on every rank: "" if it did, else each
// distinct list with the ranks that passed it. Checked in Init, where every rank meets anyway:
// adding the sets one by one, a rank with fewer sets went on while the others waited.
std::string InitialSetsMismatch(const std::vector<std::string>& lists) {
  std::map<std::string, std::vector<int>> by_list;
  for (size_t r = 0; r < lists.size(); ++r) by_list[lists[r]].push_back(static_cast<int>(r));
  if (by_list.size() <= 1) return "";
  std::ostringstream os;
  os << "Mismatched init(process_sets=...): ";
  const char* sep = "";
  for (const auto& [list, ranks] : by_list) {
    os << sep << (ranks.size() == 1 ? "rank " : "ranks ") << RankList(ranks)
       << " passed sets of ranks " << list;
    sep = "; ";
  }
  os << "; every rank must pass the same sets in the same order (Horovod did not start)";
  return os.str();
}

}  // namespace hvd
