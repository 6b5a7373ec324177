// The allreduce family of ops/ (RingAllreduce, RingAllreducePieces and its halves,
// RingReduceScatter/RingAllgather, HierarchicalAllreduce(Pieces), DirectAllreduce) on 1 to 8
// ranks as threads over the in-process transport, against the reduction computed directly.
// Inputs are small integers, so every result is exact in every dtype and compares bit for bit
// (AverageReal covers rounding, with tolerances). The other collectives: collectives_move_test.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "inproc_harness.h"
#include "ops/cpu_collectives.h"

namespace hvd {
namespace {

using namespace inproc_test;  // NOLINT: the harness is this file's vocabulary

const ReduceOp kOps[] = {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MIN, ReduceOp::MAX,
                         ReduceOp::PRODUCT};

// One scratch per rank for the whole file: fresh ones fault in 8 MiB of huge pages per rank
// per case, most of the time of a case.
RingScratch& ScratchOf(int rank) {
  static RingScratch scratch[8];
  return scratch[rank];
}

// An allreduce under test: `finish` as the engine passes it (AVERAGE's division).
using AllreduceFn = std::function<void(Transport& t, const void* src, void* dst, size_t count,
                                       DataType dt, ReduceOp op, size_t chunk_bytes,
                                       RingScratch* scratch, const SegmentFn& finish)>;

// Every dtype and op, counts from 0 through fewer than the ranks to odd ones, in place and out
// of place, chunks of 256 bytes (several per segment) and 1 MiB (one).
void CheckEveryCase(int n, int rph, const AllreduceFn& f) {
  RunRanks(n, rph, [&](Transport& t) {
    RingScratch& scratch = ScratchOf(t.rank);
    uint64_t seed = 1000 * n + rph;
    const size_t counts[] = {0, 1, static_cast<size_t>(std::max(1, n - 1)), 37, 1001};
    for (DataType dt : ReducibleTypes())
      for (ReduceOp op : kOps)
        for (size_t count : counts) {
          // In place or not, and the chunk size, alternate over the cases.
          ++seed;
          const bool in_place = (seed >> 1) % 2 == 0;
          const size_t chunk = seed % 2 ? 256 : size_t(1) << 20;
          const std::vector<char> in = ExactInput(dt, op, seed, t.rank, count);
          const std::vector<char> want = ExactReference(dt, op, seed, n, count);
          std::vector<char> src = in, out(in.size(), 0x5a);
          void* dst = in_place ? src.data() : out.data();
          f(t, src.data(), dst, count, dt, op, chunk, &scratch, AverageFinish(op, dt, n));
          EXPECT_EQ(FirstDifference(dt, dst, want.data(), count), "")
              << n << " ranks (" << rph << " per host), rank " << t.rank << ", " << DataTypeName(dt)
              << " " << ReduceOpName(op) << ", count " << count
              << (in_place ? ", in place" : ", out of place") << ", chunk " << chunk;
          if (!in_place) { EXPECT_EQ(src, in) << "the input changed"; }
        }
  });
}

TEST(RingAllreduce, EveryDtypeOpAndCount) {
  for (int n = 1; n <= 8; ++n)
    CheckEveryCase(n, 0,
                   [](Transport& t, const void* s, void* d, size_t c, DataType dt, ReduceOp op,
                      size_t chunk, RingScratch* sc, const SegmentFn& fin) {
                     RingAllreduce(s, d, c, dt, op, chunk, sc, t.comm(), fin);
                   });
}

TEST(DirectAllreduce, EveryDtypeOpAndCount) {
  // No finish: the engine scales after it, as here.
  for (int n = 1; n <= 8; ++n)
    CheckEveryCase(n, 0,
                   [](Transport& t, const void* s, void* d, size_t c, DataType dt, ReduceOp op,
                      size_t, RingScratch* sc, const SegmentFn& fin) {
                     DirectAllreduce(s, d, c, dt, op, sc, t.comm());
                     if (fin) fin(d, c);
                   });
}

TEST(HierarchicalAllreduce, EveryDtypeOpAndCount) {
  // Hosts of 2 at 4 and 6 ranks, 4 at 8, 3 at 6; one rank per host; one host.
  for (auto [n, rph] :
       std::vector<std::pair<int, int>>{{4, 2}, {6, 2}, {8, 4}, {6, 3}, {3, 1}, {4, 4}})
    CheckEveryCase(n, rph,
                   [](Transport& t, const void* s, void* d, size_t c, DataType dt, ReduceOp op,
                      size_t chunk, RingScratch* sc, const SegmentFn& fin) {
                     ASSERT_TRUE(t.homogeneous);
                     HierarchicalAllreduce(s, d, c, dt, op, chunk, sc, t.local(), t.cross(), fin);
                   });
}

// Reals: float results within rounding of the exact sum, the same bits on every rank.
TEST(RingAllreduce, AverageRealWithinRoundingSameOnEveryRank) {
  for (int n : {2, 3, 5, 8})
    for (DataType dt :
         {DataType::FLOAT16, DataType::BFLOAT16, DataType::FLOAT32, DataType::FLOAT64}) {
      const size_t count = 999;
      std::vector<std::vector<char>> in(n), got(n);
      for (int r = 0; r < n; ++r) {
        in[r].resize(count * DataTypeSize(dt));
        for (size_t i = 0; i < count; ++i)
          Put(dt, in[r].data(), i, (Rand(7, r, i) % 20001) / 10000.0 - 1.0);  // [-1, 1]
      }
      RunRanks(n, 0, [&](Transport& t) {
        RingScratch scratch;
        got[t.rank] = in[t.rank];
        RingAllreduce(got[t.rank].data(), got[t.rank].data(), count, dt, ReduceOp::AVERAGE, 256,
                      &scratch, t.comm(), AverageFinish(ReduceOp::AVERAGE, dt, n));
      });
      // Each addition rounds to the dtype: n steps of relative error eps on sums up to n.
      const double eps = dt == DataType::FLOAT16    ? 1.0 / 1024
                         : dt == DataType::BFLOAT16 ? 1.0 / 128
                         : dt == DataType::FLOAT32  ? 1e-6
                                                    : 1e-14;
      for (size_t i = 0; i < count; ++i) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += Get(dt, in[r].data(), i);
        ASSERT_NEAR(Get(dt, got[0].data(), i), sum / n, 2 * n * eps)
            << DataTypeName(dt) << ", " << n << " ranks, element " << i;
      }
      for (int r = 1; r < n; ++r) EXPECT_EQ(got[r], got[0]) << DataTypeName(dt) << " rank " << r;
    }
}

// Several tensors without a fusion buffer. Tensors of 128 KiB and more travel as messages of
// their own, small ones are packed; outputs that lie back to back are used in place.
enum class Layout { kSeparate, kInPlace, kOutputsOneBlock, kBothOneBlock };

using PiecesFn = std::function<void(Transport& t, const TensorPieces& p, DataType dt, ReduceOp op,
                                    size_t chunk, RingScratch* scratch, const SegmentFn& finish)>;

// `large`: tensors of 128 KiB as float32 (the other dtypes take `counts` alone).
void CheckPieces(int n, int rph, const std::vector<size_t>& small, const std::vector<size_t>& large,
                 const PiecesFn& f) {
  uint64_t seed = 77 * n;
  for (DataType dt : {DataType::FLOAT32, DataType::INT32, DataType::FLOAT16, DataType::INT8})
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MAX})
      for (Layout layout :
           {Layout::kSeparate, Layout::kInPlace, Layout::kOutputsOneBlock, Layout::kBothOneBlock})
        for (size_t chunk : {size_t(4096), size_t(1) << 20}) {
          seed += 100;
          const std::vector<size_t>& counts =
              dt == DataType::FLOAT32 && !large.empty() ? large : small;
          const size_t es = DataTypeSize(dt);
          size_t total = 0;
          for (size_t c : counts) total += c;
          std::vector<std::vector<char>> want;
          for (size_t i = 0; i < counts.size(); ++i)
            want.push_back(ExactReference(dt, op, seed + i, n, counts[i]));
          std::vector<std::vector<std::vector<char>>> out(n);  // rank, tensor: what it got
          RunRanks(n, rph, [&](Transport& t) {
            std::vector<std::vector<char>> src, dst;
            std::vector<char> src_block(total * es + 1), dst_block(total * es + 1);
            TensorPieces p;
            size_t off = 0;
            for (size_t i = 0; i < counts.size(); ++i) {
              src.push_back(ExactInput(dt, op, seed + i, t.rank, counts[i]));
              dst.emplace_back(src.back().size(), 0);
              char* s = src.back().data();
              char* d = dst.back().data();
              if (layout == Layout::kInPlace) d = s;
              if (layout == Layout::kOutputsOneBlock || layout == Layout::kBothOneBlock)
                d = dst_block.data() + off * es;
              if (layout == Layout::kBothOneBlock) {
                std::memcpy(src_block.data() + off * es, s, counts[i] * es);
                s = src_block.data() + off * es;
              }
              p.src.push_back(s);
              p.dst.push_back(d);
              p.count.push_back(counts[i]);
              off += counts[i];
            }
            f(t, p, dt, op, chunk, &ScratchOf(t.rank), AverageFinish(op, dt, n));
            for (size_t i = 0; i < counts.size(); ++i) {
              const char* d = static_cast<const char*>(p.dst[i]);
              out[t.rank].emplace_back(d, d + counts[i] * es);
            }
          });
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < counts.size(); ++i)
              EXPECT_EQ(FirstDifference(dt, out[r][i].data(), want[i].data(), counts[i]), "")
                  << n << " ranks (" << rph << " per host), rank " << r << ", tensor " << i << ", "
                  << DataTypeName(dt) << " " << ReduceOpName(op) << ", layout "
                  << static_cast<int>(layout) << ", chunk " << chunk;
        }
}

// Small and empty tensors, and around two of 33000 elements (132 KiB as float32: messages of
// their own).
const std::vector<size_t> kFused = {3, 0, 300, 1, 17, 5, 301, 250, 2};
const std::vector<size_t> kFusedLarge = {3, 0, 33000, 1, 17, 5, 33001, 250, 2};

void RingPieces(Transport& t, const TensorPieces& p, DataType dt, ReduceOp op, size_t chunk,
                RingScratch* scratch, const SegmentFn& finish) {
  RingAllreducePieces(p, dt, op, chunk, scratch, t.comm(), finish);
}

void HierarchicalPieces(Transport& t, const TensorPieces& p, DataType dt, ReduceOp op, size_t chunk,
                        RingScratch* scratch, const SegmentFn& finish) {
  HierarchicalAllreducePieces(p, dt, op, chunk, scratch, t.local(), t.cross(), finish);
}

TEST(RingAllreducePieces, FusedTensorsEveryLayout) {
  for (int n : {1, 2, 3, 5, 8}) CheckPieces(n, 0, kFused, kFusedLarge, RingPieces);
}

TEST(RingAllreducePieces, FewerElementsThanRanks) {
  CheckPieces(7, 0, {1, 0, 2, 1}, {}, RingPieces);
}

TEST(HierarchicalAllreducePieces, FusedTensorsEveryLayout) {
  for (auto [n, rph] : std::vector<std::pair<int, int>>{{4, 2}, {6, 2}, {8, 4}})
    CheckPieces(n, rph, kFused, kFusedLarge, HierarchicalPieces);
}

// From 8 MiB the hierarchical allreduce pipelines blocks: a second thread per rank runs the
// cross-host rings on cross() while the first runs the host's on local().
TEST(HierarchicalAllreduce, PipelinedBlocks) {
  const int n = 4;
  const size_t count = (size_t(8) << 20) / 4 + 3;  // float32, blocks of uneven size
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVERAGE}) {
    const std::vector<char> want = ExactReference(DataType::FLOAT32, op, 5, n, count);
    RunRanks(n, 2, [&](Transport& t) {
      std::vector<char> buf = ExactInput(DataType::FLOAT32, op, 5, t.rank, count);
      RingScratch scratch;
      HierarchicalAllreduce(buf.data(), buf.data(), count, DataType::FLOAT32, op, 1 << 20, &scratch,
                            t.local(), t.cross(), AverageFinish(op, DataType::FLOAT32, n));
      EXPECT_EQ(FirstDifference(DataType::FLOAT32, buf.data(), want.data(), count), "")
          << ReduceOpName(op) << ", rank " << t.rank;
    });
  }
}

// The halves alone, over segments the caller chooses: uneven, some empty.
Segments UnevenSegments(int n) {
  Segments s;
  size_t off = 0;
  for (int r = 0; r < n; ++r) {
    const size_t c = r % 3 == 1 ? 0 : 5 * r + 3;
    s.offset.push_back(off);
    s.count.push_back(c);
    off += c;
  }
  return s;
}

TEST(RingReduceScatterAndAllgather, EvenAndUnevenSegments) {
  for (int n = 1; n <= 8; ++n)
    RunRanks(n, 0, [n](Transport& t) {
      RingScratch& scratch = ScratchOf(t.rank);
      uint64_t seed = 31 * n;
      for (const Segments& seg : {EvenSegments(1001, n), EvenSegments(n - 1, n), UnevenSegments(n)})
        for (DataType dt : {DataType::FLOAT64, DataType::INT16, DataType::BFLOAT16})
          for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::PRODUCT})
            for (bool in_place : {true, false}) {
              ++seed;
              const size_t count = seg.offset.back() + seg.count.back(), es = DataTypeSize(dt);
              std::vector<char> src = ExactInput(dt, op, seed, t.rank, count);
              std::vector<char> out(src.size(), 0);
              void* dst = in_place ? src.data() : out.data();
              RingReduceScatter(src.data(), dst, dt, op, seg, 48, &scratch, t.comm());
              // Only this rank's segment is reduced.
              const std::vector<char> want = ExactReference(dt, op, seed, n, count);
              const size_t at = seg.offset[t.rank] * es;
              EXPECT_EQ(FirstDifference(dt, static_cast<char*>(dst) + at, want.data() + at,
                                        seg.count[t.rank]),
                        "")
                  << "reduce-scatter, rank " << t.rank << ", " << DataTypeName(dt) << " "
                  << ReduceOpName(op) << ", count " << count;
              // The allgather spreads each rank's segment to all.
              std::vector<char> gathered(want.size(), 0);
              std::memcpy(gathered.data() + at, want.data() + at, seg.count[t.rank] * es);
              RingAllgather(gathered.data(), es, seg, t.comm());
              EXPECT_EQ(FirstDifference(dt, gathered.data(), want.data(), count), "")
                  << "allgather, rank " << t.rank << ", count " << count;
            }
    });
}

// `finish` runs exactly once on each element of this rank's segment, and on nothing else.
TEST(RingReduceScatterPieces, FinishRunsOnceOnThisRanksSegment) {
  for (int n : {1, 2, 3, 6})
    RunRanks(n, 0, [n](Transport& t) {
      const std::vector<size_t> counts = {7, 0, 30, 2};
      std::vector<std::vector<char>> buf;
      TensorPieces p;
      for (size_t i = 0; i < counts.size(); ++i) {
        buf.push_back(ExactInput(DataType::INT32, ReduceOp::SUM, 9 + i, t.rank, counts[i]));
        p.src.push_back(buf.back().data());
        p.dst.push_back(buf.back().data());
        p.count.push_back(counts[i]);
      }
      const Segments seg = EvenSegments(39, n);
      std::vector<int> hits(39, 0);
      RingScratch scratch;
      RingReduceScatterPieces(p, seg, DataType::INT32, ReduceOp::SUM, 8, &scratch, t.comm(),
                              [&](void* d, size_t c) {
                                // Find which element of the virtual buffer d is.
                                size_t base = 0;
                                for (size_t i = 0; i < counts.size(); ++i) {
                                  const char* b = buf[i].data();
                                  const char* e = b + counts[i] * 4;
                                  if (d >= b && d < e) {
                                    const size_t at = base + (static_cast<char*>(d) - b) / 4;
                                    for (size_t k = 0; k < c; ++k) ++hits[at + k];
                                  }
                                  base += counts[i];
                                }
                              });
      for (size_t i = 0; i < 39; ++i) {
        const bool mine = i >= seg.offset[t.rank] && i < seg.offset[t.rank] + seg.count[t.rank];
        EXPECT_EQ(hits[i], mine ? 1 : 0) << "element " << i << ", rank " << t.rank;
      }
    });
}

}  // namespace
}  // namespace hvd
