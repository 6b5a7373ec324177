// The tensors of a fused response laid back to back as one virtual buffer, as the pieces ring
// walks them (internal to csrc/ops; ring_allreduce.cc says why).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "ops/cpu_collectives.h"

namespace hvd {

// In the ring's reduce-scatter a piece of a tensor this large travels as its own message,
// straight from the tensor, instead of being packed with its neighbours: above it a message
// (~4 us on shared memory) costs less than the copy (TensorLayout::Messages' `own`).
constexpr size_t kOwnMessageBytes = size_t(128) << 10;

// The tensors back to back: element `off` of the virtual buffer is element off - start[i] of
// tensor i.
class TensorLayout {
 public:
  TensorLayout(const TensorPieces& t, size_t esize) : t_(t), esize_(esize) {
    start_.push_back(0);
    for (size_t c : t.count) start_.push_back(start_.back() + c);
    for (size_t i = 0; i + 1 < t.count.size(); ++i) {
      const size_t bytes = t.count[i] * esize;
      joined_[0].push_back(static_cast<const char*>(t.src[i]) + bytes == t.src[i + 1]);
      joined_[1].push_back(static_cast<char*>(t.dst[i]) + bytes == t.dst[i + 1]);
    }
  }
  size_t total() const { return start_.back(); }
  size_t pieces() const { return t_.count.size(); }
  // f(tensor, element offset in it, elements) for each piece of [off, off + n), in order.
  template <typename F>
  void ForEach(size_t off, size_t n, F f) const {
    size_t i = std::upper_bound(start_.begin(), start_.end(), off) - start_.begin() - 1;
    while (n > 0 && i < t_.count.size()) {
      const size_t in = off - start_[i], take = std::min(n, t_.count[i] - in);
      if (take > 0) f(i, in, take);
      off += take;
      n -= take;
      ++i;
    }
  }
  // Where [off, off + n) (n > 0) of the inputs (src) or outputs starts, if it lies back to back
  // in this rank's memory; nullptr if not.
  char* Contiguous(size_t off, size_t n, bool src) const {
    char* first = nullptr;
    size_t last = 0;
    bool joined = true;
    ForEach(off, n, [&](size_t i, size_t in, size_t) {
      if (!first)
        first = Base(i, src) + in * esize_;
      else
        for (size_t b = last; b < i && joined; ++b) joined = joined_[src ? 0 : 1][b];
      last = i;
    });
    return joined ? first : nullptr;
  }
  // The messages [off, off + n) travels in: f(offset, elements) for each piece of one tensor of
  // at least `own` bytes, and for each run of smaller pieces between them, in order; one message
  // if own is 0. Decided from the counts alone, so both ends cut a chunk alike.
  template <typename F>
  void Messages(size_t off, size_t n, size_t own, F f) const {
    if (own == 0) {
      if (n > 0) f(off, n);
      return;
    }
    size_t run = off, run_n = 0;
    ForEach(off, n, [&](size_t i, size_t in, size_t take) {
      if (take * esize_ < own) {
        run_n += take;
        return;
      }
      if (run_n > 0) f(run, run_n);
      f(start_[i] + in, take);
      run = start_[i] + in + take;
      run_n = 0;
    });
    if (run_n > 0) f(run, run_n);
  }
  // Copies [off, off + n) of the inputs or outputs into `to`, back to back.
  void Pack(size_t off, size_t n, bool src, char* to) const {
    ForEach(off, n, [&](size_t i, size_t in, size_t take) {
      std::memcpy(to, Base(i, src) + in * esize_, take * esize_);
      to += take * esize_;
    });
  }
  // Copies `from` (back to back) into [off, off + n) of the outputs.
  void Unpack(size_t off, size_t n, const char* from) const {
    ForEach(off, n, [&](size_t i, size_t in, size_t take) {
      std::memcpy(Base(i, false) + in * esize_, from, take * esize_);
      from += take * esize_;
    });
  }

 private:
  char* Base(size_t i, bool src) const {
    return src ? const_cast<char*>(static_cast<const char*>(t_.src[i]))
               : static_cast<char*>(t_.dst[i]);
  }
  const TensorPieces& t_;
  size_t esize_;
  std::vector<size_t> start_;
  std::vector<bool> joined_[2];  // tensor i ends where i + 1 starts: inputs, outputs
};

}  // namespace hvd
