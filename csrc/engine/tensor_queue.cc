#include "engine/tensor_queue.h"

#include <algorithm>
#include <chrono>

namespace hvd {

Status TensorQueue::Add(std::vector<TensorEntry> entries) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return closed_status_;
    // Each entry goes straight into the table: a name already there (in flight, or earlier in
    // this group) takes back the ones this call put in and rejects the whole call. One lookup
    // per name, where a separate check took three.
    const int64_t now = NowMicros();
    std::vector<TensorEntry*> added;
    added.reserve(entries.size());
    for (auto& e : entries) {
      e.enqueued_us = now;
      auto [it, inserted] = table_.try_emplace(e.request.name);
      if (!inserted) {  // e was not moved from
        for (TensorEntry* a : added) {
          const std::string key = a->request.name;  // not a reference into the erased node
          table_.erase(key);
        }
        return Status::InvalidArgument("tensor name '" + e.request.name +
                                       "' is already in flight on this rank; names of "
                                       "concurrent ops must be unique");
      }
      it->second = std::move(e);
      added.push_back(&it->second);  // elements stay put when the table rehashes
    }
    for (TensorEntry* a : added) new_requests_.push_back(a->request);
    wake_ = true;
    wake_hint_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
  return Status();
}

void TensorQueue::WaitForWork(int64_t deadline_us, int64_t spin_until_us) {
  spin_until_us = std::min(spin_until_us, deadline_us);
  while (!wake_hint_.load(std::memory_order_acquire) && NowMicros() < spin_until_us) CpuRelax();
  std::unique_lock<std::mutex> lk(mu_);
  int64_t now = NowMicros();
  if (!wake_ && deadline_us > now)
    cv_.wait_for(lk, std::chrono::microseconds(deadline_us - now), [this] { return wake_; });
  wake_ = false;
  wake_hint_.store(false, std::memory_order_relaxed);
}

void TensorQueue::Wake() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    wake_ = true;
    wake_hint_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
}

std::vector<Request> TensorQueue::PopNewRequests() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Request> out;
  out.swap(new_requests_);
  return out;
}

bool TensorQueue::Take(const std::string& name, TensorEntry* out) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = table_.find(name);
  if (it == table_.end()) return false;
  *out = std::move(it->second);
  table_.erase(it);
  return true;
}

const TensorEntry* TensorQueue::Peek(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = table_.find(name);
  return it == table_.end() ? nullptr : &it->second;
}

void TensorQueue::FailAll(const Status& status) {
  std::unordered_map<std::string, TensorEntry> failed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    closed_status_ = status;
    failed.swap(table_);
    new_requests_.clear();
  }
  for (auto& kv : failed)
    if (kv.second.done) kv.second.done(status);
}

size_t TensorQueue::InFlight() {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.size();
}

}  // namespace hvd
