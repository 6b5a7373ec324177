// Adasum allreduce (op=hvd.Adasum) in upstream's vector-halving, distance-doubling (VHDD) form.
//
// Adasum combines two gradients a and b as
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a coefficient is 1 where its vector's squared norm is below sqrt(DBL_MIN): a zero vector adds
// nothing and leaves the other one as it is), and the vectors of p = 2^k ranks as a binary tree:
// level 1 combines ranks (0, 1), (2, 3), ...; level 2 combines the results of {0, 1} and {2, 3};
// and so on. The combination is not associative, so this tree is the definition (the NumPy
// reference in tests/support/reference.py builds the same one). Each tensor of a fused buffer is
// a vector of its own: dot products and norms are per tensor, never over the fused buffer.
//
// Reduce-scatter by vector halving, distance doubling: at level d = 1, 2, 4, ..., p/2 a rank and
// its partner rank ^ d hold the same range of the buffer (each its own group's partial result);
// the lower one keeps the first half of it, the upper the second, and each sends the other the
// half it gives up. Both groups' values of the kept half are then on the rank, but a dot product
// needs whole tensors: the 2d ranks of the merged group hold disjoint pieces that cover the
// buffer, so their per-tensor partial sums (a.b, |a|^2, |b|^2) are added up across the group
// (recursive doubling over distances 1..d; upstream uses an MPI_Allreduce on a communicator per
// level, this needs none) before each rank combines its piece. After log2 p levels a rank holds
// 1/p of the result; the allgather retraces the levels in reverse, each exchange doubling the
// range held, so every rank ends with the same bytes.
//
// Cost per rank, n elements and T tensors: (1 - 1/p) n elements sent and received in each phase
// (as the ring, in 2 log2 p messages instead of 2 (p - 1)), plus log2 p (log2 p + 1) / 2 small
// messages of 3T doubles for the sums; about 5 n multiply-adds in double for the dots and the
// combinations (each level works on half the range of the one before).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "common/reduce_kernels.h"
#include "common/watch_progress.h"
#include "ops/cpu_collectives.h"

namespace hvd {
namespace {

constexpr int kAdasumTag = 300;

// Element access in double: float16 and bfloat16 through float32, as the reduction kernels.
template <typename T>
struct Elem {
  static double Get(const T* p, size_t i) { return static_cast<double>(p[i]); }
  static void Set(T* p, size_t i, double v) { p[i] = static_cast<T>(v); }
};
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};
template <>
struct Elem<Half> {
  static double Get(const Half* p, size_t i) { return HalfToFloat(p[i].bits); }
  static void Set(Half* p, size_t i, double v) { p[i].bits = FloatToHalf(static_cast<float>(v)); }
};
template <>
struct Elem<BHalf> {
  static double Get(const BHalf* p, size_t i) { return BFloat16ToFloat(p[i].bits); }
  static void Set(BHalf* p, size_t i, double v) {
    p[i].bits = FloatToBFloat16(static_cast<float>(v));
  }
};

template <typename T>
AdasumDots Dots(const T* a, const T* b, size_t n) {
  AdasumDots d;
  for (size_t i = 0; i < n; ++i) {
    const double x = Elem<T>::Get(a, i), y = Elem<T>::Get(b, i);
    d.ab += x * y;
    d.aa += x * x;
    d.bb += y * y;
  }
  return d;
}

template <typename T>
void ScaledAdd(T* a, double ca, const T* b, double cb, size_t n) {
  for (size_t i = 0; i < n; ++i)
    Elem<T>::Set(a, i, ca * Elem<T>::Get(a, i) + cb * Elem<T>::Get(b, i));
}

// Calls f with the element type of a floating dtype (the only ones Adasum takes:
// UnsupportedReduction refuses the rest at negotiation).
template <typename F>
void WithFloatType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::FLOAT16: f(static_cast<Half*>(nullptr)); break;
    case DataType::BFLOAT16: f(static_cast<BHalf*>(nullptr)); break;
    case DataType::FLOAT32: f(static_cast<float*>(nullptr)); break;
    case DataType::FLOAT64: f(static_cast<double*>(nullptr)); break;
    default: break;
  }
}

}  // namespace

AdasumDots AdasumDot(const void* a, const void* b, size_t count, DataType dtype) {
  AdasumDots d;
  WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    d = Dots(static_cast<const T*>(a), static_cast<const T*>(b), count);
  });
  return d;
}

void AdasumCoefficients(const AdasumDots& d, double* ca, double* cb) {
  static const double kTiny = std::sqrt(DBL_MIN);  // below: a zero vector, coefficient 1
  *ca = d.aa >= kTiny ? 1.0 - d.ab / (2.0 * d.aa) : 1.0;
  *cb = d.bb >= kTiny ? 1.0 - d.ab / (2.0 * d.bb) : 1.0;
}

void AdasumScaledAdd(void* a, double ca, const void* b, double cb, size_t count, DataType dtype) {
  WithFloatType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ScaledAdd(static_cast<T*>(a), ca, static_cast<const T*>(b), cb, count);
  });
}

void AdasumVhdd(void* buf, const std::vector<int64_t>& counts, DataType dtype, int rank, int size,
                void* scratch, const PeerExchange& exchange) {
  const size_t esize = DataTypeSize(dtype);
  char* data = static_cast<char*>(buf);
  char* theirs = static_cast<char*>(scratch);
  std::vector<size_t> start(counts.size() + 1, 0);  // tensor t is [start[t], start[t + 1])
  for (size_t t = 0; t < counts.size(); ++t) start[t + 1] = start[t] + counts[t];
  const size_t ntensors = counts.size();
  // Per tensor: a.b, |left|^2, |right|^2, where left is the group whose ranks have bit d clear.
  std::vector<double> sums(3 * ntensors), peer_sums(3 * ntensors);
  std::vector<std::pair<size_t, size_t>> held;  // the range held before each level
  size_t lo = 0, hi = start.back();

  for (int d = 1; d < size; d <<= 1) {
    const int peer = rank ^ d;
    const bool left = (rank & d) == 0;
    held.emplace_back(lo, hi);
    const size_t mid = lo + (hi - lo) / 2;
    const size_t keep_lo = left ? lo : mid, keep_hi = left ? mid : hi;
    const size_t give_lo = left ? mid : lo, give_hi = left ? hi : mid;
    exchange(peer, data + give_lo * esize, (give_hi - give_lo) * esize, theirs,
             (keep_hi - keep_lo) * esize);
    lo = keep_lo;
    hi = keep_hi;
    // This rank's share of each tensor's sums: the part of the tensor inside [lo, hi).
    std::fill(sums.begin(), sums.end(), 0.0);
    for (size_t t = 0; t < ntensors; ++t) {
      const size_t a = std::max(lo, start[t]), b = std::min(hi, start[t + 1]);
      if (a >= b) continue;
      const AdasumDots s = AdasumDot(data + a * esize, theirs + (a - lo) * esize, b - a, dtype);
      sums[3 * t] = s.ab;
      sums[3 * t + 1] = left ? s.aa : s.bb;
      sums[3 * t + 2] = left ? s.bb : s.aa;
    }
    // Added up over the 2d ranks of the merged group. x + y == y + x in floating point, so
    // every rank of the group ends with the same bits, and so the same coefficients.
    for (int s = 1; s <= d; s <<= 1) {
      exchange(rank ^ s, sums.data(), sums.size() * sizeof(double), peer_sums.data(),
               peer_sums.size() * sizeof(double));
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += peer_sums[i];
    }
    for (size_t t = 0; t < ntensors; ++t) {
      const size_t a = std::max(lo, start[t]), b = std::min(hi, start[t + 1]);
      if (a >= b) continue;
      double c_left, c_right;
      AdasumCoefficients({sums[3 * t], sums[3 * t + 1], sums[3 * t + 2]}, &c_left, &c_right);
      AdasumScaledAdd(data + a * esize, left ? c_left : c_right, theirs + (a - lo) * esize,
                      left ? c_right : c_left, b - a, dtype);
    }
    WatchProgress();
  }
  // Distance halving: the partner of each level holds the other half of the range held before it.
  for (int d = size >> 1; d >= 1; d >>= 1) {
    const auto [plo, phi] = held.back();
    held.pop_back();
    const bool left = (rank & d) == 0;
    const size_t other_lo = left ? hi : plo, other_hi = left ? phi : lo;
    exchange(rank ^ d, data + lo * esize, (hi - lo) * esize, data + other_lo * esize,
             (other_hi - other_lo) * esize);
    lo = plo;
    hi = phi;
  }
}

void AdasumAllreduce(void* buf, const std::vector<int64_t>& counts, DataType dtype,
                     RingScratch* scratch, Comm& comm) {
  const int rank = comm.rank(), size = comm.size();
  size_t total = 0;
  for (auto c : counts) total += static_cast<size_t>(c);
  // The most a rank receives at once: the larger half of the buffer, at the first level.
  void* theirs = scratch->Get(0, (total / 2 + 1) * DataTypeSize(dtype));
  AdasumVhdd(buf, counts, dtype, rank, size, theirs,
             [&](int peer, const void* send, size_t send_bytes, void* recv, size_t recv_bytes) {
               SendRecvBytes(send, send_bytes, peer, recv, recv_bytes, peer, kAdasumTag, comm);
             });
}

}  // namespace hvd
