// Threads as ranks over the in-process transport (transport/inproc), and the element access and
// deterministic test data that the tests of the collectives and control rounds share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/reduce_kernels.h"
#include "transport/inproc/inproc_transport.h"

namespace hvd {
namespace inproc_test {

// A rank still running after this long waits for a message no peer sends: the process ends
// with the test's name instead of hanging the suite.
constexpr int kHangSeconds = 60;

// Runs fn(transport) on n threads (rank r on thread r, transports built concurrently, as the
// topology needs) and returns once all are done. Assertions inside fn work (gtest's are
// thread-safe); an exception fails the test.
// `eager_limit`: InprocWorld::set_eager_limit (0: every send but an empty one waits for its
// receive).
inline void RunRanks(int n, int ranks_per_host, size_t eager_limit,
                     const std::function<void(Transport&)>& fn) {
  // The threads outnumber the cores: a wait sleeps at once (and wakes on arrival) instead of
  // spinning a millisecond while the peer it waits for has no core.
  SetDataWaitSpin(0);
  auto world = std::make_shared<InprocWorld>(n, ranks_per_host);
  world->set_eager_limit(eager_limit);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<Transport> t = MakeInprocTransport(world, r);
        fn(*t);
        t->Finalize();
      } catch (const std::exception& e) { errors[r] = e.what(); }
      std::lock_guard<std::mutex> l(mu);
      ++done;
      cv.notify_all();
    });
  {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, std::chrono::seconds(kHangSeconds), [&] { return done == n; })) {
      const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr, "FATAL: %d of %d ranks still running after %d s in %s.%s\n", n - done, n,
                   kHangSeconds, info ? info->test_suite_name() : "?", info ? info->name() : "?");
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r << " threw";
}

inline void RunRanks(int n, int ranks_per_host, const std::function<void(Transport&)>& fn) {
  RunRanks(n, ranks_per_host, SIZE_MAX, fn);
}

// The dtypes reductions take (all but BOOL).
inline std::vector<DataType> ReducibleTypes() {
  return {DataType::UINT8,   DataType::INT8,   DataType::UINT16,  DataType::INT16,
          DataType::INT32,   DataType::INT64,  DataType::FLOAT16, DataType::BFLOAT16,
          DataType::FLOAT32, DataType::FLOAT64};
}

inline bool IsUnsigned(DataType t) {
  return t == DataType::UINT8 || t == DataType::UINT16 || t == DataType::BOOL;
}

// Element i of a buffer of dtype t, as a double.
inline double Get(DataType t, const void* p, size_t i) {
  switch (t) {
    case DataType::UINT8:
    case DataType::BOOL: return static_cast<const uint8_t*>(p)[i];
    case DataType::INT8: return static_cast<const int8_t*>(p)[i];
    case DataType::UINT16: return static_cast<const uint16_t*>(p)[i];
    case DataType::INT16: return static_cast<const int16_t*>(p)[i];
    case DataType::INT32: return static_cast<const int32_t*>(p)[i];
    case DataType::INT64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DataType::FLOAT16: return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::BFLOAT16: return BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::FLOAT32: return static_cast<const float*>(p)[i];
    case DataType::FLOAT64: return static_cast<const double*>(p)[i];
  }
  return 0;
}

// Stores v; integers wrap (through int64) as the kernels' sums and products do.
inline void Put(DataType t, void* p, size_t i, double v) {
  const int64_t w = IsFloating(t) ? 0 : static_cast<int64_t>(v);
  switch (t) {
    case DataType::UINT8:
    case DataType::BOOL: static_cast<uint8_t*>(p)[i] = uint8_t(w); break;
    case DataType::INT8: static_cast<int8_t*>(p)[i] = int8_t(w); break;
    case DataType::UINT16: static_cast<uint16_t*>(p)[i] = uint16_t(w); break;
    case DataType::INT16: static_cast<int16_t*>(p)[i] = int16_t(w); break;
    case DataType::INT32: static_cast<int32_t*>(p)[i] = int32_t(w); break;
    case DataType::INT64: static_cast<int64_t*>(p)[i] = w; break;
    case DataType::FLOAT16: static_cast<uint16_t*>(p)[i] = FloatToHalf(float(v)); break;
    case DataType::BFLOAT16: static_cast<uint16_t*>(p)[i] = FloatToBFloat16(float(v)); break;
    case DataType::FLOAT32: static_cast<float*>(p)[i] = float(v); break;
    case DataType::FLOAT64: static_cast<double*>(p)[i] = v; break;
  }
}

// splitmix64: data from (seed, rank, index) alone, so every rank can build every rank's input.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t Rand(uint64_t seed, int rank, size_t i) {
  return Mix(seed * 0x100000001b3ull ^ Mix(static_cast<uint64_t>(rank) << 40 ^ i));
}

// Integer-valued inputs whose reductions over up to 8 ranks are exact in every dtype (float16
// and bfloat16 hold integers up to 256 exactly): results compare bit for bit.
inline double ExactValue(DataType t, ReduceOp op, uint64_t seed, int rank, size_t i) {
  const uint64_t x = Rand(seed, rank, i);
  switch (op) {
    case ReduceOp::PRODUCT: {  // |product| <= 2^8; integers may wrap, as in the reference
      static const double kSigned[] = {-2, -1, 1, 2, 1, -1, 1, 1};
      return IsUnsigned(t) ? 1 + x % 2 : kSigned[x % 8];
    }
    case ReduceOp::MIN:
    case ReduceOp::MAX: return IsUnsigned(t) ? double(x % 201) : double(x % 201) - 100;
    default:  // SUM, AVERAGE: |sum| <= 64
      return IsUnsigned(t) ? double(x % 9) : double(x % 9) - 4;
  }
}

// Rank `rank`'s buffer of `count` elements.
inline std::vector<char> ExactInput(DataType t, ReduceOp op, uint64_t seed, int rank,
                                    size_t count) {
  std::vector<char> b(count * DataTypeSize(t) + 1);
  for (size_t i = 0; i < count; ++i) Put(t, b.data(), i, ExactValue(t, op, seed, rank, i));
  return b;
}

// The reduction of every rank's ExactInput computed directly, element by element (AVERAGE: the
// sum, scaled by ScaleAndAverage as the ops' `finish` does).
inline std::vector<char> ExactReference(DataType t, ReduceOp op, uint64_t seed, int n,
                                        size_t count) {
  std::vector<char> out(count * DataTypeSize(t) + 1);
  for (size_t i = 0; i < count; ++i) {
    double acc = ExactValue(t, op, seed, 0, i);
    for (int r = 1; r < n; ++r) {
      const double v = ExactValue(t, op, seed, r, i);
      switch (op) {
        case ReduceOp::MIN: acc = std::min(acc, v); break;
        case ReduceOp::MAX: acc = std::max(acc, v); break;
        case ReduceOp::PRODUCT: acc *= v; break;
        default: acc += v; break;
      }
    }
    Put(t, out.data(), i, acc);
  }
  if (op == ReduceOp::AVERAGE) ScaleAndAverage(out.data(), count, t, 1.0, n);
  return out;
}

// What the engine's finish does for AVERAGE (none for the other ops).
inline std::function<void(void*, size_t)> AverageFinish(ReduceOp op, DataType t, int n) {
  if (op != ReduceOp::AVERAGE) return nullptr;
  return [t, n](void* p, size_t c) { ScaleAndAverage(p, c, t, 1.0, n); };
}

// "" if a and b hold the same `count` elements, else where they first differ.
inline std::string FirstDifference(DataType t, const void* got, const void* want, size_t count) {
  const size_t es = DataTypeSize(t);
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es,
                    es) != 0)
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " +
             std::to_string(Get(t, got, i)) + ", want " + std::to_string(Get(t, want, i));
  return "";
}

}  // namespace inproc_test
}  // namespace hvd
