// Hierarchical allreduce and allgather: two levels, the ranks of one host (shared memory, fast)
// and the ranks of one local rank across hosts (the network, slow). Both need every host to hold
// the same number of ranks, l per host on c hosts (n = l c); the engine checks that first.
//
// Allreduce of B bytes:
//   1. ring reduce-scatter inside the host: local rank j holds the host's sum of segment j (B/l);
//   2. ring allreduce of segment j across the hosts, among the c ranks of local rank j;
//   3. ring allgather inside the host.
// A host sends 2(c-1)/c * B over the network, through its l ranks at once. The flat ring over n
// ranks placed host by host sends 2(n-1)/n * B out of each host through one rank (2x2: 1.5 B
// against 1 B), one stream per host boundary. The shared-memory steps add (l-1)/l * B each way.
// Pipelined (B >= 2 blocks, l > 1 and c > 1, a transport whose Comms two threads may drive): the
// buffer is cut into at most kMaxBlocks blocks of at least kMinBlockBytes; this thread
// reduce-scatters every block, then allgathers them in order, while a second thread runs each
// block's step 2 as soon as its step 1 is done. The host steps then hide behind the network one
// instead of adding to it (2x4 on 400 Mbit/s links: 0.39-0.45 s of 1.79 s for 64 MiB were host
// steps; docs/shaped-links.md). Every rank runs the same order of steps on each communicator (all
// of step 1, then step 3 by block; step 2 by block), so the blocks' messages never cross.
//
// Allgather of the rows of every rank into one output of B bytes (row counts may differ):
//   1. ring allgather across the hosts among the ranks of local rank j ("column" j): each rank
//      then holds the rows of its column, one block per host;
//   2. ring allgather of the columns inside the host: l-1 steps, each moving one column.
// A host sends (c-1)/c * B over the network (each of its blocks once to every other host); the
// flat ring passes (n-1)/n * B through each host boundary (2x2: 0.75 B against 0.5 B).
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/watch_progress.h"
#include "ops/cpu_collectives.h"
#include "ops/ring_steps.h"

namespace hvd {
namespace {

constexpr int kColumnTag = 300;
// A block's host steps cost a few ms: the pipeline fills and drains in one block of each.
constexpr size_t kMinBlockBytes = size_t(4) << 20;
constexpr size_t kMaxBlocks = 8;

// Step 2 of each block, in block order, on a thread of its own (Comm::ThreadsMultiple: it moves
// data on `cross` while the caller's thread moves it on `local`). Its waits are the ring's own
// (data waits the watchdog sees progress through), so Wait() is bounded by theirs.
class CrossSteps {
 public:
  CrossSteps(DataType dtype, ReduceOp op, size_t chunk_bytes, Comm& cross, const SegmentFn& finish)
      : thread_([this, dtype, op, chunk_bytes, c = &cross, finish] {
          Run(dtype, op, chunk_bytes, *c, finish);
        }) {}
  ~CrossSteps() {
    Push(TensorPieces{}, true);
    thread_.join();
  }
  void Push(TensorPieces block, bool last = false) {
    std::lock_guard<std::mutex> lock(mu_);
    todo_.push_back(std::move(block));
    closed_ = last;
    cv_.notify_all();
  }
  // Until block b's step 2 is done.
  void Wait(size_t b) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ > b; });
  }

 private:
  void Run(DataType dtype, ReduceOp op, size_t chunk_bytes, Comm& cross, const SegmentFn& finish) {
    RingScratch scratch;  // the caller's is in use on the other thread
    for (;;) {
      TensorPieces block;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !todo_.empty(); });
        block = std::move(todo_.front());
        todo_.pop_front();
        if (block.count.empty() && closed_ && todo_.empty()) return;
      }
      RingAllreducePieces(block, dtype, op, chunk_bytes, &scratch, cross, finish);
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TensorPieces> todo_;
  bool closed_ = false;
  size_t done_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

void HierarchicalAllreducePieces(const TensorPieces& t, DataType dtype, ReduceOp op,
                                 size_t chunk_bytes, RingScratch* scratch, Comm& local, Comm& cross,
                                 const SegmentFn& finish) {
  size_t count = 0;
  for (size_t c : t.count) count += c;
  if (count == 0) return;
  const int local_rank = local.rank(), local_size = local.size(), cross_size = cross.size();
  const size_t esize = DataTypeSize(dtype);
  // Blocks of whole elements, the same on every rank (count, sizes and transport alike everywhere).
  const size_t blocks = std::min(kMaxBlocks, count * esize / kMinBlockBytes);
  if (blocks >= 2 && local_size > 1 && cross_size > 1 && local.ThreadsMultiple() &&
      cross.ThreadsMultiple()) {
    const Segments block = EvenSegments(count, static_cast<int>(blocks));
    std::vector<Segments> seg;
    CrossSteps cross_steps(dtype, op, chunk_bytes, cross, finish);
    for (size_t b = 0; b < blocks; ++b) {
      const TensorPieces tb = SliceOfPieces(t, block.offset[b], block.count[b], esize);
      seg.push_back(EvenSegments(block.count[b], local_size));
      RingReduceScatterPieces(tb, seg[b], dtype, op, chunk_bytes, scratch, local);
      cross_steps.Push(
          SliceOfOutputs(tb, seg[b].offset[local_rank], seg[b].count[local_rank], esize));
    }
    for (size_t b = 0; b < blocks; ++b) {
      cross_steps.Wait(b);
      RingAllgatherPieces(SliceOfOutputs(t, block.offset[b], block.count[b], esize), seg[b], esize,
                          chunk_bytes, scratch, local);
    }
    return;
  }
  const Segments seg = EvenSegments(count, local_size);
  RingReduceScatterPieces(t, seg, dtype, op, chunk_bytes, scratch, local);
  const TensorPieces mine = SliceOfOutputs(t, seg.offset[local_rank], seg.count[local_rank], esize);
  if (cross_size > 1) {
    RingAllreducePieces(mine, dtype, op, chunk_bytes, scratch, cross, finish);
  } else if (finish) {
    for (size_t i = 0; i < mine.count.size(); ++i) finish(mine.dst[i], mine.count[i]);
  }
  RingAllgatherPieces(t, seg, esize, chunk_bytes, scratch, local);
}

void HierarchicalAllreduce(const void* src, void* dst, size_t count, DataType dtype, ReduceOp op,
                           size_t chunk_bytes, RingScratch* scratch, Comm& local, Comm& cross,
                           const SegmentFn& finish) {
  HierarchicalAllreducePieces(OneTensor(src, dst, count), dtype, op, chunk_bytes, scratch, local,
                              cross, finish);
}

void HierarchicalAllgather(const void* in, void* out, size_t row_bytes,
                           const std::vector<int64_t>& first_dims, const HostLayout& layout,
                           Comm& local, Comm& cross) {
  const int n = static_cast<int>(first_dims.size());
  std::vector<size_t> offset(n + 1, 0);
  for (int r = 0; r < n; ++r) offset[r + 1] = offset[r] + static_cast<size_t>(first_dims[r]);
  char* base = static_cast<char*>(out);
  PrefaultWithProgress(out, offset[n] * row_bytes);
  CopyWithProgress(base + offset[layout.rank] * row_bytes, in,
                   static_cast<size_t>(first_dims[layout.rank]) * row_bytes);
  if (row_bytes == 0) return;
  // 1. This rank's column across the hosts: segment i is the rows of cross member i.
  Segments column;
  for (int r : layout.cross_members) {
    column.offset.push_back(offset[r]);
    column.count.push_back(static_cast<size_t>(first_dims[r]));
  }
  RingAllgather(out, row_bytes, column, cross);
  // 2. The columns around the host's ring. Column j is local rank j's rows on every host, one
  // piece per host in host order, so sender and receiver cut it the same way.
  const int local_rank = local.rank(), local_size = local.size();
  if (local_size == 1) return;
  // rank_at[h * l + j]: the rank that is local rank j on host h.
  std::vector<int> rank_at(static_cast<size_t>(layout.num_hosts) * local_size, -1);
  for (int r = 0; r < n; ++r) rank_at[layout.host_of[r] * local_size + layout.local_rank_of[r]] = r;
  const int right = RingMod(local_rank + 1, local_size), left = RingMod(local_rank - 1, local_size);
  for (int s = 0; s < local_size - 1; ++s) {
    const int send_col = RingMod(local_rank - s, local_size);
    const int recv_col = RingMod(local_rank - s - 1, local_size);
    for (int h = 0; h < layout.num_hosts; ++h) {
      const int sr = rank_at[h * local_size + send_col], rr = rank_at[h * local_size + recv_col];
      SendRecvBytes(base + offset[sr] * row_bytes, first_dims[sr] * row_bytes, right,
                    base + offset[rr] * row_bytes, first_dims[rr] * row_bytes, left, kColumnTag + s,
                    local);
    }
  }
}

}  // namespace hvd
