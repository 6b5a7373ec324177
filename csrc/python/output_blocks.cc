// Output blocks (output_blocks.h). Why keep freed blocks: a training loop calls
// grouped_allreduce without `out` every step, and NumPy's fresh arrays for its outputs are
// memory glibc hands back to the system between steps (the heap top is trimmed past 128 KiB)
// and faults in again on the next step's first write. Measured on a 16-core VM, 100 x 40 KiB:
// 3.8 ms per group with fresh outputs against 2.2 ms writing into the same arrays
// (docs/benchmarks.md). A kept block is written into pages already mapped. Large blocks too:
// a model's 13.4 MiB of gradients (MobileNetV2) in fresh huge pages cost 1-2 ms of faults and
// zeroing per step on a 2-core VM, more than the allreduce's own copies.
#include "python/output_blocks.h"

#include <sys/mman.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

#include "common/common.h"

namespace hvd_py {
namespace {

struct Block {
  void* data;
  size_t bytes;
};

// Blocks of 4 MiB and more are 2 MiB pages (AllocateOutput), 512 times fewer faults.
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = 2 * kHugePage;
// Enough blocks for a step's calls in flight at once (100 async allreduces hold one each), and
// bytes for a model's gradients; a block over kKeepBytes is freed, as NumPy's memory would be,
// and keeping one past either bound frees the oldest kept first: the newest are the ones the
// next step asks for again.
constexpr size_t kKeepBlocks = 128;
constexpr size_t kKeepBytes = size_t(256) << 20;

std::mutex g_mu;
// Never destroyed: capsules may die during interpreter exit, after static destructors. Oldest
// first.
std::deque<Block>& g_kept = *new std::deque<Block>;
size_t g_kept_bytes = 0;

void Keep(Block b) {
  std::vector<void*> drop;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (b.bytes > kKeepBytes) {
      drop.push_back(b.data);
    } else {
      while (!g_kept.empty() &&
             (g_kept.size() >= kKeepBlocks || g_kept_bytes + b.bytes > kKeepBytes)) {
        drop.push_back(g_kept.front().data);
        g_kept_bytes -= g_kept.front().bytes;
        g_kept.pop_front();
      }
      g_kept.push_back(b);
      g_kept_bytes += b.bytes;
    }
  }
  for (void* p : drop) std::free(p);  // outside the lock: freeing huge pages takes a while
}

}  // namespace

void* AllocateOutput(size_t bytes) {
  // Large ones 2 MiB aligned and advised to use transparent huge pages, as NumPy does for its
  // own arrays: the first touch then faults 2 MiB at a time instead of 4 KiB. A 1.2 GB
  // allgather on 2 ranks took 1.2M faults and 2.4 s before (docs/benchmarks.md).
  // Small ones 64-byte aligned, as NumPy's are (a block's views keep that alignment).
  if (bytes < kHugeFrom) return std::aligned_alloc(64, hvd::RoundUp64(bytes ? bytes : 1));
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a refusal changes nothing
  return p;
}

py::capsule TakeOutputBlock(size_t bytes, void** data) {
  Block b{nullptr, 0};
  {
    // The smallest kept block that fits, unless it is over twice the size: a small call must
    // not pin a large block while the large call that freed it allocates another.
    std::lock_guard<std::mutex> lk(g_mu);
    size_t best = g_kept.size();
    for (size_t i = 0; i < g_kept.size(); ++i)
      if (g_kept[i].bytes >= bytes && g_kept[i].bytes / 2 <= bytes &&
          (best == g_kept.size() || g_kept[i].bytes < g_kept[best].bytes))
        best = i;
    if (best < g_kept.size()) {
      b = g_kept[best];
      g_kept.erase(g_kept.begin() + static_cast<std::ptrdiff_t>(best));
      g_kept_bytes -= b.bytes;
    }
  }
  if (!b.data) {
    b = {AllocateOutput(bytes), bytes};
    if (!b.data) throw std::bad_alloc();
  }
  *data = b.data;
  return py::capsule(new Block(b), [](void* p) {
    Block* owned = static_cast<Block*>(p);
    Keep(*owned);
    delete owned;
  });
}

}  // namespace hvd_py
