// Responses of tensors negotiated before, for the steady-state fast path: a rank that submits a
// tensor with exactly the parameters of a cached one sets that entry's bit, and one bitwise-AND
// allreduce of the bit vector tells every rank which tensors are ready everywhere, with no trip
// through the coordinator. Every rank applies the same inserts, touches and evictions in the same
// order, so slot numbers (bit positions) agree across ranks without being communicated.
#pragma once

#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/message.h"

namespace hvd {

class ResponseCache {
 public:
  enum class Lookup { MISS, HIT, INVALID };  // INVALID: cached, but with other parameters

  void SetCapacity(size_t capacity);
  size_t capacity() const { return slots_.size(); }
  Lookup Find(const Request& local, int* slot) const;
  const Response& Get(int slot) const { return slots_[slot].response; }
  bool Used(int slot) const { return slots_[slot].used; }
  void Touch(int slot);
  // Caches a single-tensor response with this rank's request; returns the slot it evicted to
  // make room, or -1.
  int Put(const Response& response, const Request& local);
  void Erase(int slot);

 private:
  struct Slot {
    bool used = false;
    Response response;
    Request request;
    std::list<int>::iterator lru;
  };
  std::vector<Slot> slots_;
  std::unordered_map<std::string, int> by_name_;
  std::list<int> lru_;     // front = most recently used
  std::vector<int> free_;  // stack of free slots, identical on every rank
};

}  // namespace hvd
