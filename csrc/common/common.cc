#include "common/common.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>

namespace hvd {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::UINT8:
    case DataType::INT8:
    case DataType::BOOL: return 1;
    case DataType::FLOAT16:
    case DataType::BFLOAT16:
    case DataType::UINT16:
    case DataType::INT16: return 2;
    case DataType::INT32:
    case DataType::FLOAT32: return 4;
    case DataType::INT64:
    case DataType::FLOAT64: return 8;
  }
  return 0;
}

const char* DataTypeName(DataType t) {
  static const char* names[] = {"uint8",   "int8",    "int32", "int64",  "float16", "bfloat16",
                                "float32", "float64", "bool",  "uint16", "int16"};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumDataTypes, "a name per DataType");
  auto i = static_cast<unsigned>(t);
  return i < kNumDataTypes ? names[i] : "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  static const char* names[] = {"Sum", "Average", "Min", "Max", "Product", "Adasum"};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumReduceOps, "a name per ReduceOp");
  auto i = static_cast<unsigned>(op);
  return i < kNumReduceOps ? names[i] : "unknown";
}

const char* OpTypeName(OpType t) {
  static const char* names[] = {"ALLREDUCE",       "ALLGATHER",         "BROADCAST",
                                "ALLTOALL",        "REDUCESCATTER",     "JOIN",
                                "ADD_PROCESS_SET", "REMOVE_PROCESS_SET"};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumOpTypes, "a name per OpType");
  auto i = static_cast<unsigned>(t);
  return i < kNumOpTypes ? names[i] : "UNKNOWN";
}

std::string SupportedDataTypes() {
  // Integers by width, then floats by width: the reducible dtypes, every one but bool.
  static const DataType order[] = {
      DataType::UINT8, DataType::INT8,    DataType::UINT16,   DataType::INT16,   DataType::INT32,
      DataType::INT64, DataType::FLOAT16, DataType::BFLOAT16, DataType::FLOAT32, DataType::FLOAT64};
  static_assert(sizeof(order) / sizeof(order[0]) == kNumDataTypes - 1, "every DataType but BOOL");
  const size_t n = sizeof(order) / sizeof(order[0]);
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + DataTypeName(order[i]);
  return s + " (or " + DataTypeName(DataType::BOOL) + ", for allgather, broadcast and alltoall)";
}

bool IsFloating(DataType t) {
  return t == DataType::FLOAT16 || t == DataType::BFLOAT16 || t == DataType::FLOAT32 ||
         t == DataType::FLOAT64;
}

bool IsInteger(DataType t) {
  return t == DataType::UINT8 || t == DataType::INT8 || t == DataType::UINT16 ||
         t == DataType::INT16 || t == DataType::INT32 || t == DataType::INT64;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

size_t RowElements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

bool ShapeBytes(const std::vector<int64_t>& shape, DataType t, int64_t* bytes) {
  int64_t n = static_cast<int64_t>(DataTypeSize(t));
  for (auto d : shape)
    if (d < 0 || !CheckedMul(n, d, &n)) return false;
  *bytes = n;
  return true;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string RankList(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
  return os.str();
}

std::string Ranks(const std::vector<int>& ranks) {
  return ranks.size() == 1 ? "rank " + std::to_string(ranks[0]) : "ranks " + RankList(ranks);
}

std::string MachineId() {
  char buf[256] = {0};
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!std::fgets(buf, sizeof(buf), f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string id(buf);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (id.empty()) {
    gethostname(buf, sizeof(buf) - 1);
    id = buf;
  }
  return id;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace hvd
