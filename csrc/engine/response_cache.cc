#include "engine/response_cache.h"

namespace hvd {

void ResponseCache::SetCapacity(size_t capacity) {
  slots_.assign(capacity, Slot());
  by_name_.clear();
  lru_.clear();
  free_.clear();
  for (size_t i = capacity; i-- > 0;) free_.push_back(static_cast<int>(i));
}

ResponseCache::Lookup ResponseCache::Find(const Request& local, int* slot) const {
  auto it = by_name_.find(local.name);
  if (it == by_name_.end()) return Lookup::MISS;
  *slot = it->second;
  return slots_[it->second].request.SameParams(local) ? Lookup::HIT : Lookup::INVALID;
}

void ResponseCache::Touch(int slot) { lru_.splice(lru_.begin(), lru_, slots_[slot].lru); }

int ResponseCache::Put(const Response& response, const Request& local) {
  if (slots_.empty()) return -1;
  auto existing = by_name_.find(local.name);
  if (existing != by_name_.end()) Erase(existing->second);
  int evicted = -1;
  if (free_.empty()) {
    evicted = lru_.back();
    Erase(evicted);
  }
  int slot = free_.back();
  free_.pop_back();
  Slot& s = slots_[slot];
  s.used = true;
  s.response = response;
  s.request = local;
  lru_.push_front(slot);
  s.lru = lru_.begin();
  by_name_[local.name] = slot;
  return evicted;
}

void ResponseCache::Erase(int slot) {
  Slot& s = slots_[slot];
  if (!s.used) return;
  by_name_.erase(s.request.name);
  lru_.erase(s.lru);
  s = Slot();
  free_.push_back(slot);
}

}  // namespace hvd
