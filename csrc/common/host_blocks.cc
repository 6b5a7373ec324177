// Host blocks (host_blocks.h). Why keep freed blocks: a training loop reduces a step's gradients
// every step, and fresh memory for their outputs is memory glibc hands back to the system
// between steps (the heap top is trimmed past 128 KiB) and faults in again on the next step's
// first write. Measured on a 16-core VM, 100 x 40 KiB through NumPy: 3.8 ms per group with
// fresh outputs against 2.2 ms writing into the same arrays (docs/benchmarks.md). Large blocks
// too: a model's 13.4 MiB of gradients (MobileNetV2) in fresh huge pages cost 1-2 ms of faults
// and zeroing per step on a 2-core VM. Why huge pages: a fresh 1.2 GB allgather output on 4 KiB
// pages took 1.2M faults and 2.4 s, and Open MPI's shared-memory transport (CMA) pins and copies
// every page it moves: a 13.4 MiB allreduce took 2.0 ms on 4 KiB pages against 1.4 ms on 2 MiB.
#include "common/host_blocks.h"

#include <sys/mman.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <vector>

#include "common/common.h"

namespace hvd {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = 2 * kHugePage;
// Enough blocks for a step's calls in flight at once (100 async allreduces hold one each), and
// bytes for a model's gradients; the newest are the ones the next step asks for again.
constexpr size_t kKeepBlocks = 128;
constexpr size_t kKeepBytes = size_t(256) << 20;

std::mutex g_mu;
// Never destroyed: blocks may come back during interpreter exit, after static destructors.
// Oldest first.
std::deque<HostBlock>& g_kept = *new std::deque<HostBlock>;
size_t g_kept_bytes = 0;

void* AllocateHost(size_t bytes) {
  // Small ones 64-byte aligned, as NumPy's arrays are (a block's views keep that alignment).
  if (bytes < kHugeFrom) return std::aligned_alloc(64, RoundUp64(bytes ? bytes : 1));
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a refusal changes nothing
  return p;
}

}  // namespace

HostBlock TakeHostBlock(size_t bytes) {
  HostBlock b;
  {
    // At most twice the size: a small call must not pin a large block while the large call
    // that freed it allocates another.
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
      return b;
    }
  }
  b.data = AllocateHost(bytes);
  b.bytes = b.data ? bytes : 0;
  return b;
}

void KeepHostBlock(HostBlock b) {
  if (!b.data) return;
  if (b.bytes == 0) {  // an empty output's: nothing to keep, and it must not push out others
    std::free(b.data);
    return;
  }
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

size_t KeptHostBytes() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_kept_bytes;
}

}  // namespace hvd
