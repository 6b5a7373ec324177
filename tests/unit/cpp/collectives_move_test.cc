// The collectives of ops/ besides the allreduce family (collectives_test.cc): Allgather and
// HierarchicalAllgather with uneven first dimensions, Broadcast from every root, Alltoall with
// uneven splits, Reducescatter, AdasumAllreduce; on 1 to 8 ranks as threads over the in-process
// transport, against results computed directly. Each runs again with rendezvous sends (a send
// completes only once its receive is posted), so no algorithm may rely on buffered sends.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "inproc_harness.h"
#include "ops/cpu_collectives.h"

namespace hvd {
namespace {

using namespace inproc_test;  // NOLINT: the harness is this file's vocabulary

constexpr size_t kEager = SIZE_MAX, kRendezvous = 0;

RingScratch& ScratchOf(int rank) {  // one per rank for the file: fresh ones fault in MiBs
  static RingScratch scratch[8];
  return scratch[rank];
}

// Rows per rank, some ranks with none.
std::vector<int64_t> FirstDims(int n, int pattern) {
  std::vector<int64_t> d(n);
  for (int r = 0; r < n; ++r) d[r] = pattern == 0 ? (r * 3 + 1) % 4 : pattern == 1 ? 0 : r + 2;
  return d;
}

// Byte k of rank r's rows.
char RowByte(int r, size_t k) { return static_cast<char>(Rand(3, r, k)); }

// Every rank's rows, in rank order: what an allgather must produce.
std::vector<char> Concatenated(const std::vector<int64_t>& dims, size_t row_bytes) {
  std::vector<char> all;
  for (size_t r = 0; r < dims.size(); ++r)
    for (size_t k = 0; k < dims[r] * row_bytes; ++k) all.push_back(RowByte(static_cast<int>(r), k));
  return all;
}

// Allgather (flat, or hierarchical where rph > 0) of every rank's rows.
void CheckAllgather(int n, int rph, bool hierarchical, size_t eager) {
  for (int pattern : {0, 1, 2})
    for (size_t row_bytes : {size_t(1), size_t(12), size_t(0)}) {
      const std::vector<int64_t> dims = FirstDims(n, pattern);
      const std::vector<char> want = Concatenated(dims, row_bytes);
      RunRanks(n, rph, eager, [&](Transport& t) {
        std::vector<char> in(dims[t.rank] * row_bytes + 1);
        for (size_t k = 0; k + 1 < in.size(); ++k) in[k] = RowByte(t.rank, k);
        std::vector<char> out(want.size() + 1, 0);
        if (hierarchical) {
          HostLayout layout;
          layout.rank = t.rank;
          layout.num_hosts = t.num_hosts;
          layout.host_of = t.host_of;
          layout.local_rank_of = t.local_rank_of;
          layout.cross_members = t.cross_members;
          HierarchicalAllgather(in.data(), out.data(), row_bytes, dims, layout, t.local(),
                                t.cross());
        } else {
          Allgather(in.data(), out.data(), row_bytes, dims, t.comm());
        }
        out.pop_back();
        EXPECT_EQ(out, want) << n << " ranks (" << rph << " per host), rank " << t.rank
                             << ", pattern " << pattern << ", row bytes " << row_bytes;
      });
    }
}

TEST(Allgather, UnevenFirstDims) {
  for (int n = 1; n <= 8; ++n) CheckAllgather(n, 0, false, kEager);
}

TEST(HierarchicalAllgather, UnevenFirstDims) {
  for (auto [n, rph] :
       std::vector<std::pair<int, int>>{{4, 2}, {6, 2}, {8, 4}, {6, 3}, {4, 1}, {4, 4}})
    CheckAllgather(n, rph, true, kEager);
}

void CheckBroadcast(int n, const std::vector<size_t>& sizes, size_t eager) {
  RunRanks(n, 0, eager, [&](Transport& t) {
    for (int root = 0; root < n; ++root)
      for (size_t bytes : sizes) {
        std::vector<char> buf(bytes);
        for (size_t k = 0; k < bytes; ++k) buf[k] = t.rank == root ? RowByte(root, k) : 0;
        Broadcast(buf.data(), bytes, root, t.comm());
        std::vector<char> want(bytes);
        for (size_t k = 0; k < bytes; ++k) want[k] = RowByte(root, k);
        EXPECT_EQ(buf, want) << n << " ranks, root " << root << ", " << bytes << " bytes, rank "
                             << t.rank;
      }
  });
}

TEST(Broadcast, FromEveryRoot) {
  for (int n = 1; n <= 8; ++n) CheckBroadcast(n, {0, 1, 1001}, kEager);
  // Several of the chain's 1 MiB pieces and a partial one.
  for (int n : {3, 8}) CheckBroadcast(n, {(size_t(2) << 20) + 5}, kEager);
}

// Rows rank r sends rank q: uneven, some zero.
int64_t Split(int r, int q) { return (r + 2 * q) % 3; }

void CheckAlltoall(int n, size_t eager) {
  for (size_t row_bytes : {size_t(4), size_t(1), size_t(0)})
    RunRanks(n, 0, eager, [&](Transport& t) {
      // Row j of the rows rank r sends to q: bytes RowByte(r * 64 + q, ...).
      std::vector<int64_t> send_rows(n);
      std::vector<char> in;
      for (int q = 0; q < n; ++q) {
        send_rows[q] = Split(t.rank, q);
        for (size_t k = 0; k < send_rows[q] * row_bytes; ++k)
          in.push_back(RowByte(t.rank * 64 + q, k));
      }
      in.push_back(0);
      std::vector<char> want;
      for (int q = 0; q < n; ++q)
        for (size_t k = 0; k < Split(q, t.rank) * row_bytes; ++k)
          want.push_back(RowByte(q * 64 + t.rank, k));
      std::vector<int64_t> recv_rows;
      std::vector<char> out;
      int64_t allocated = -1;
      const bool ok = Alltoall(
          in.data(), row_bytes, send_rows, &recv_rows,
          [&](int64_t rows) {
            allocated = rows;
            out.resize(rows * row_bytes + 1);
            return static_cast<void*>(out.data());
          },
          t.comm());
      EXPECT_TRUE(ok);
      int64_t total = 0;
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(recv_rows[q], Split(q, t.rank)) << "from " << q;
        total += Split(q, t.rank);
      }
      EXPECT_EQ(allocated, total);
      out.pop_back();
      EXPECT_EQ(out, want) << n << " ranks, rank " << t.rank << ", row bytes " << row_bytes;
    });
}

TEST(Alltoall, UnevenSplits) {
  for (int n = 1; n <= 8; ++n) CheckAlltoall(n, kEager);
}

TEST(Alltoall, ARankWithoutOutputStillServesItsPeers) {
  RunRanks(4, 0, [](Transport& t) {
    const std::vector<int64_t> send_rows = {2, 2, 2, 2};
    std::vector<int32_t> in(8, t.rank), out(8, -1);
    std::vector<int64_t> recv_rows;
    const bool ok = Alltoall(
        in.data(), 4, send_rows, &recv_rows,
        [&](int64_t) { return t.rank == 2 ? nullptr : out.data(); }, t.comm());
    EXPECT_EQ(ok, t.rank != 2);
    if (ok) { EXPECT_EQ(out, (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3})); }
  });
}

void CheckReducescatter(int n, size_t eager) {
  RunRanks(n, 0, eager, [&](Transport& t) {
    uint64_t seed = 500 + n;
    for (size_t rows : {size_t(0), size_t(1), static_cast<size_t>(n - 1), size_t(2 * n + 1)})
      for (size_t row_elems : {size_t(1), size_t(3)})
        for (DataType dt : {DataType::FLOAT32, DataType::INT64, DataType::FLOAT16, DataType::UINT8})
          for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVERAGE, ReduceOp::MIN, ReduceOp::MAX,
                              ReduceOp::PRODUCT}) {
            ++seed;
            const size_t count = rows * row_elems, es = DataTypeSize(dt);
            std::vector<char> src = ExactInput(dt, op, seed, t.rank, count);
            std::vector<char> work(src.size());
            const bool in_place = seed % 2 == 0;
            const Segments seg = EvenSegments(count, n, row_elems);
            std::vector<char> out(seg.count[t.rank] * es + 1);
            Reducescatter(src.data(), in_place ? src.data() : work.data(), count, row_elems, dt, op,
                          64, &ScratchOf(t.rank), t.comm(), out.data());
            if (op == ReduceOp::AVERAGE)  // the engine scales the output afterwards
              ScaleAndAverage(out.data(), seg.count[t.rank], dt, 1.0, n);
            const std::vector<char> want = ExactReference(dt, op, seed, n, count);
            EXPECT_EQ(FirstDifference(dt, out.data(), want.data() + seg.offset[t.rank] * es,
                                      seg.count[t.rank]),
                      "")
                << n << " ranks, rank " << t.rank << ", " << rows << " rows of " << row_elems
                << ", " << DataTypeName(dt) << " " << ReduceOpName(op);
          }
  });
}

TEST(Reducescatter, RowsSplitOverRanks) {
  for (int n = 1; n <= 8; ++n) CheckReducescatter(n, kEager);
}

// Adasum's definition: a binary tree of pairwise combinations, per tensor, in double.
std::vector<double> Combine(const std::vector<double>& a, const std::vector<double>& b) {
  AdasumDots d = AdasumDot(a.data(), b.data(), a.size(), DataType::FLOAT64);
  double ca, cb;
  AdasumCoefficients(d, &ca, &cb);
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

std::vector<double> AdasumTree(std::vector<std::vector<double>> v,
                               const std::vector<int64_t>& counts) {
  while (v.size() > 1) {
    std::vector<std::vector<double>> next;
    for (size_t g = 0; g < v.size(); g += 2) {
      std::vector<double> merged;
      size_t off = 0;
      for (int64_t c : counts) {
        const std::vector<double> a(v[g].begin() + off, v[g].begin() + off + c);
        const std::vector<double> b(v[g + 1].begin() + off, v[g + 1].begin() + off + c);
        const std::vector<double> r = Combine(a, b);
        merged.insert(merged.end(), r.begin(), r.end());
        off += c;
      }
      next.push_back(merged);
    }
    v = next;
  }
  return v[0];
}

void CheckAdasum(int n, size_t eager) {
  const std::vector<std::vector<int64_t>> cases = {{1}, {7}, {1000}, {3, 5, 1, 17, 0, 64}};
  for (DataType dt : {DataType::FLOAT64, DataType::FLOAT32, DataType::FLOAT16, DataType::BFLOAT16})
    for (const auto& counts : cases) {
      size_t total = 0;
      for (int64_t c : counts) total += c;
      // Inputs as the dtype stores them; one tensor zero on rank 0 (its coefficient is 1).
      std::vector<std::vector<char>> in(n), got(n);
      std::vector<std::vector<double>> exact(n, std::vector<double>(total));
      for (int r = 0; r < n; ++r) {
        in[r].resize(total * DataTypeSize(dt));
        for (size_t i = 0; i < total; ++i) {
          const bool zero = r == 0 && counts.size() > 1 && i < static_cast<size_t>(counts[0]);
          Put(dt, in[r].data(), i, zero ? 0.0 : (Rand(11, r, i) % 2001) / 1000.0 - 1.0);
          exact[r][i] = Get(dt, in[r].data(), i);
        }
      }
      RunRanks(n, 0, eager, [&](Transport& t) {
        got[t.rank] = in[t.rank];
        AdasumAllreduce(got[t.rank].data(), counts, dt, &ScratchOf(t.rank), t.comm());
      });
      const std::vector<double> want = AdasumTree(exact, counts);
      // The op stores each level's result in the dtype: its rounding, log2(n) times.
      const double tol = dt == DataType::FLOAT64   ? 1e-12
                         : dt == DataType::FLOAT32 ? 1e-5
                         : dt == DataType::FLOAT16 ? 4e-3
                                                   : 3e-2;
      for (size_t i = 0; i < total; ++i)
        ASSERT_NEAR(Get(dt, got[0].data(), i), want[i], tol * (1 + std::fabs(want[i])))
            << n << " ranks, " << DataTypeName(dt) << ", " << counts.size() << " tensors, [" << i
            << "]";
      for (int r = 1; r < n; ++r) EXPECT_EQ(got[r], got[0]) << "rank " << r;
    }
}

TEST(AdasumAllreduce, MatchesTheTree) {
  for (int n : {1, 2, 4, 8}) CheckAdasum(n, kEager);
}

// A Comm that moves nothing and records what is posted: every transfer complete as it is
// posted (as inproc and tcp complete a transfer whose data is already there), or pending until
// the next test (as MPI's requests).
class RecordingComm : public Comm {
 public:
  explicit RecordingComm(bool complete_at_post) : at_post_(complete_at_post) { size_ = 2; }
  Transfer Isend(const void* data, size_t bytes, int, int) override {
    sends.emplace_back(static_cast<const char*>(data), bytes);
    return Post();
  }
  Transfer Irecv(void* data, size_t bytes, int, int) override {
    recvs.emplace_back(static_cast<const char*>(data), bytes);
    return Post();
  }
  bool TestAll(int n, Transfer* t) override {
    for (int i = 0; i < n; ++i) t[i] = Transfer();
    return true;
  }
  int TestAny(int n, Transfer* t, bool* all_idle) override {
    *all_idle = true;
    for (int i = 0; i < n; ++i)
      if (t[i].handle) {
        t[i] = Transfer();
        *all_idle = false;
        return i;
      }
    return -1;
  }
  std::vector<std::pair<const char*, size_t>> sends, recvs;

 private:
  Transfer Post() { return Transfer{at_post_ ? nullptr : this}; }
  bool at_post_;
};

// SendRecvBytes cuts each direction into 16 MiB pieces, 4 in flight: every piece is posted
// once, in order, whether transfers complete at posting or later. The buffers (80 MiB) are
// never touched, so never paged in.
TEST(SendRecvBytes, EveryPiecePostedOnceWhenTransfersCompleteAtPosting) {
  const size_t bytes = (size_t(80) << 20) + 1, piece = size_t(16) << 20;
  std::unique_ptr<char[]> send(new char[bytes]), recv(new char[bytes]);
  for (bool at_post : {false, true}) {
    RecordingComm c(at_post);
    SendRecvBytes(send.get(), bytes, 1, recv.get(), bytes, 1, 5, c);
    for (const auto* posted : {&c.sends, &c.recvs}) {
      const char* base = posted == &c.sends ? send.get() : recv.get();
      ASSERT_EQ(posted->size(), 6u) << (posted == &c.sends ? "sends" : "receives")
                                    << (at_post ? ", complete at posting" : "");
      for (size_t k = 0; k < 6; ++k) {
        EXPECT_EQ((*posted)[k].first, base + k * piece) << "piece " << k;
        EXPECT_EQ((*posted)[k].second, std::min(piece, bytes - k * piece)) << "piece " << k;
      }
    }
  }
}

// Rendezvous: every send waits for its receive. An algorithm that waits on a send before
// posting the receive its peer's send needs deadlocks here (RunRanks ends the process).
TEST(Rendezvous, EveryCollectiveStillCompletes) {
  for (int n : {2, 3, 4, 5}) {
    CheckAllgather(n, 0, false, kRendezvous);
    CheckBroadcast(n, {0, 7, (size_t(1) << 20) + 9}, kRendezvous);
    CheckAlltoall(n, kRendezvous);
    CheckReducescatter(n, kRendezvous);
  }
  CheckAllgather(6, 2, true, kRendezvous);
  CheckAdasum(4, kRendezvous);
}

TEST(Rendezvous, AllreducesStillComplete) {
  for (auto [n, rph] : std::vector<std::pair<int, int>>{{3, 0}, {4, 2}, {6, 3}}) {
    const size_t count = 5000;
    const std::vector<char> want = ExactReference(DataType::FLOAT32, ReduceOp::SUM, 1, n, count);
    RunRanks(n, rph, kRendezvous, [&](Transport& t) {
      const std::vector<char> in = ExactInput(DataType::FLOAT32, ReduceOp::SUM, 1, t.rank, count);
      for (int algo = 0; algo < 3; ++algo) {
        std::vector<char> buf = in;
        if (algo == 0)
          RingAllreduce(buf.data(), buf.data(), count, DataType::FLOAT32, ReduceOp::SUM, 1024,
                        &ScratchOf(t.rank), t.comm());
        else if (algo == 1)
          DirectAllreduce(buf.data(), buf.data(), count, DataType::FLOAT32, ReduceOp::SUM,
                          &ScratchOf(t.rank), t.comm());
        else if (rph > 0)
          HierarchicalAllreduce(buf.data(), buf.data(), count, DataType::FLOAT32, ReduceOp::SUM,
                                1024, &ScratchOf(t.rank), t.local(), t.cross());
        else
          continue;
        EXPECT_EQ(FirstDifference(DataType::FLOAT32, buf.data(), want.data(), count), "")
            << "algorithm " << algo << ", " << n << " ranks";
      }
    });
  }
}

}  // namespace
}  // namespace hvd
