// Adasum (ops/adasum.cc): the pairwise combination, and the VHDD schedule run on threads that
// stand in for ranks (a mailbox per ordered pair of ranks instead of MPI), against the
// definition: a binary tree of pairwise combinations, per tensor, computed directly.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/reduce_kernels.h"
#include "ops/cpu_collectives.h"

namespace hvd {
namespace {

std::vector<double> Combine(const std::vector<double>& a, const std::vector<double>& b) {
  AdasumDots d = AdasumDot(a.data(), b.data(), a.size(), DataType::FLOAT64);
  double ca, cb;
  AdasumCoefficients(d, &ca, &cb);
  std::vector<double> out(a);
  AdasumScaledAdd(out.data(), ca, b.data(), cb, a.size(), DataType::FLOAT64);
  return out;
}

TEST(AdasumCombine, OrthogonalVectorsAdd) {
  EXPECT_EQ(Combine({3, 0}, {0, 4}), (std::vector<double>{3, 4}));
}

TEST(AdasumCombine, EqualVectorsGiveTheVector) {
  // a.b = |a|^2: each coefficient is 1/2.
  EXPECT_EQ(Combine({1, -2, 5}, {1, -2, 5}), (std::vector<double>{1, -2, 5}));
}

TEST(AdasumCombine, OppositeVectorsCancel) {
  EXPECT_EQ(Combine({1, 2}, {-1, -2}), (std::vector<double>{0, 0}));
}

TEST(AdasumCombine, AZeroVectorLeavesTheOther) {
  EXPECT_EQ(Combine({0, 0, 0}, {1, 2, 3}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(Combine({1, 2, 3}, {0, 0, 0}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(Combine({0, 0}, {0, 0}), (std::vector<double>{0, 0}));
}

TEST(AdasumCombine, GeneralCaseMatchesTheFormula) {
  const std::vector<double> a{1, 2, 3}, b{4, -1, 2};
  const double ab = 4 - 2 + 6, aa = 14, bb = 21;
  const std::vector<double> got = Combine(a, b);
  for (int i = 0; i < 3; ++i)
    EXPECT_DOUBLE_EQ(got[i], (1 - ab / (2 * aa)) * a[i] + (1 - ab / (2 * bb)) * b[i]);
}

TEST(AdasumCombine, HalfTypesComputeInFloat) {
  // 1 and 2 in float16 and bfloat16: orthogonal halves of a vector add exactly.
  for (DataType dt : {DataType::FLOAT16, DataType::BFLOAT16}) {
    auto enc = [&](float f) {
      return dt == DataType::FLOAT16 ? FloatToHalf(f) : FloatToBFloat16(f);
    };
    auto dec = [&](uint16_t h) {
      return dt == DataType::FLOAT16 ? HalfToFloat(h) : BFloat16ToFloat(h);
    };
    std::vector<uint16_t> a{enc(1), enc(0)}, b{enc(0), enc(2)};
    AdasumDots d = AdasumDot(a.data(), b.data(), 2, dt);
    EXPECT_EQ(d.ab, 0);
    EXPECT_EQ(d.aa, 1);
    EXPECT_EQ(d.bb, 4);
    double ca, cb;
    AdasumCoefficients(d, &ca, &cb);
    AdasumScaledAdd(a.data(), ca, b.data(), cb, 2, dt);
    EXPECT_EQ(dec(a[0]), 1.0f) << DataTypeName(dt);
    EXPECT_EQ(dec(a[1]), 2.0f) << DataTypeName(dt);
  }
}

// Point-to-point messages between threads: exchange() posts to (me -> peer), then takes from
// (peer -> me), so both sides of an exchange proceed in either order.
class Mailboxes {
 public:
  void Exchange(int me, int peer, const void* send, size_t send_bytes, void* recv,
                size_t recv_bytes) {
    {
      std::lock_guard<std::mutex> l(mu_);
      const char* s = static_cast<const char*>(send);
      box_[{me, peer}].emplace_back(s, s + send_bytes);
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> l(mu_);
    auto& q = box_[{peer, me}];
    cv_.wait(l, [&] { return !q.empty(); });
    ASSERT_EQ(q.front().size(), recv_bytes) << "rank " << me << " from " << peer;
    if (recv_bytes) std::memcpy(recv, q.front().data(), recv_bytes);
    q.pop_front();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> box_;
};

// The definition: level by level, the vectors of adjacent groups combined pairwise, per tensor.
std::vector<double> TreeReference(std::vector<std::vector<double>> v,
                                  const std::vector<int64_t>& counts) {
  while (v.size() > 1) {
    std::vector<std::vector<double>> next;
    for (size_t i = 0; i < v.size(); i += 2) {
      std::vector<double> out;
      size_t off = 0;
      for (int64_t c : counts) {
        std::vector<double> a(v[i].begin() + off, v[i].begin() + off + c);
        std::vector<double> b(v[i + 1].begin() + off, v[i + 1].begin() + off + c);
        std::vector<double> r = Combine(a, b);
        out.insert(out.end(), r.begin(), r.end());
        off += c;
      }
      next.push_back(out);
    }
    v = next;
  }
  return v[0];
}

void RunVhdd(int size, const std::vector<int64_t>& counts) {
  SCOPED_TRACE(::testing::Message() << size << " ranks, " << counts.size() << " tensors");
  size_t total = 0;
  for (auto c : counts) total += c;
  std::mt19937 gen(size * 1000 + total);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> in(size, std::vector<double>(total));
  for (auto& v : in)
    for (auto& x : v) x = normal(gen);
  // One tensor is zero on rank 0 (its coefficient must be 1), and one is equal on ranks 0 and 1.
  if (counts.size() > 1)
    for (int64_t i = 0; i < counts[0]; ++i) in[0][i] = 0;
  if (counts.size() > 2 && size > 1)
    for (int64_t i = counts[0]; i < counts[0] + counts[1]; ++i) in[1][i] = in[0][i];
  std::vector<std::vector<double>> out = in;
  Mailboxes mail;
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      std::vector<double> scratch(total / 2 + 1);
      AdasumVhdd(out[r].data(), counts, DataType::FLOAT64, r, size, scratch.data(),
                 [&](int peer, const void* s, size_t sb, void* d, size_t db) {
                   mail.Exchange(r, peer, s, sb, d, db);
                 });
    });
  for (auto& t : ranks) t.join();
  const std::vector<double> want = TreeReference(in, counts);
  for (int r = 0; r < size; ++r) {
    // Every rank ends with the same bits.
    EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), total * sizeof(double)), 0) << "rank " << r;
    for (size_t i = 0; i < total; ++i)
      ASSERT_NEAR(out[r][i], want[i], 1e-12 * (1 + std::fabs(want[i])))
          << "rank " << r << " [" << i << "]";
  }
}

TEST(AdasumVhdd, MatchesTheTreeOnEveryRank) {
  for (int size : {1, 2, 4, 8}) {
    RunVhdd(size, {1});
    RunVhdd(size, {7});
    RunVhdd(size, {1000});
    RunVhdd(size, {3, 5, 1, 17, 0, 64});  // a fused buffer: tensors cut anywhere by the halving
  }
}

}  // namespace
}  // namespace hvd
