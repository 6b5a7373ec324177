// Core types shared by every part of the engine: dtypes, reduce ops, op types, Status.
// Framework-neutral: nothing here knows about Python, TensorFlow or MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hvd {

// Wire values: do not reorder, they cross process boundaries and the Python bindings. A new
// value goes at the end (and into kNum*, the names, and the tests that enumerate them).
enum class DataType : uint8_t {
  UINT8 = 0,
  INT8,
  INT32,
  INT64,
  FLOAT16,
  BFLOAT16,
  FLOAT32,
  FLOAT64,
  // One byte, 0 or 1. Moved (allgather, broadcast, alltoall), never reduced; a dtype of its own
  // so that a bool tensor on one rank and a uint8 tensor on another are a dtype mismatch.
  BOOL,
  // Appended for upstream's TF ops (allgather, broadcast, alltoall take them). Reduced on the
  // CPU; NCCL has no 16-bit integer type, so GPU reductions refuse them (UnsupportedReduction).
  UINT16,
  INT16
};
// ADASUM: upstream's adaptive summation (ops/adasum.cc); appended, values are on the wire.
enum class ReduceOp : uint8_t { SUM = 0, AVERAGE, MIN, MAX, PRODUCT, ADASUM };
// JOIN: a rank that ran out of data (hvd.join()); see Controller. ADD_PROCESS_SET and
// REMOVE_PROCESS_SET: hvd.add_process_set/remove_process_set, negotiated on the global set so that
// every rank changes its sets at the same point (engine/runtime_changes.cc). Appended: values are
// on the wire.
enum class OpType : uint8_t {
  ALLREDUCE = 0,
  ALLGATHER,
  BROADCAST,
  ALLTOALL,
  REDUCESCATTER,
  JOIN,
  ADD_PROCESS_SET,
  REMOVE_PROCESS_SET
};
// Requests the response cache never holds: rank 0 must see each of them.
inline bool IsControlOp(OpType t) {
  return t == OpType::JOIN || t == OpType::ADD_PROCESS_SET || t == OpType::REMOVE_PROCESS_SET;
}

constexpr int kNumDataTypes = 11;
constexpr int kNumReduceOps = 6;
constexpr int kNumOpTypes = 8;

size_t DataTypeSize(DataType t);
const char* DataTypeName(DataType t);
const char* ReduceOpName(ReduceOp op);
const char* OpTypeName(OpType t);  // "ALLREDUCE", ...
// The dtypes a frontend may hand over, for its "dtype ... is not supported" message: "uint8,
// int8, uint16, int16, int32, int64, float16, bfloat16, float32 or float64 (or bool, for
// allgather, broadcast and alltoall)", from DataTypeName.
std::string SupportedDataTypes();
bool IsFloating(DataType t);
bool IsInteger(DataType t);  // uint8, int8, uint16, int16, int32, int64 (not bool)
// Reductions: allreduce and reducescatter (the ops with a reduce op and scale factors).
inline bool IsReduction(OpType t) { return t == OpType::ALLREDUCE || t == OpType::REDUCESCATTER; }

int64_t NumElements(const std::vector<int64_t>& shape);  // shape already checked by ShapeBytes
// Elements per row: the product of every dimension but the first (1 for a vector).
size_t RowElements(const std::vector<int64_t>& shape);
// Overflow-checked arithmetic for sizes computed from user input: false instead of wrapping.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
// `bytes` rounded up to a multiple of 64: a cache line, and the alignment of output blocks
// (OutputBlockOffsets in engine.h, std::aligned_alloc, which takes whole multiples).
inline size_t RoundUp64(size_t bytes) { return (bytes + 63) / 64 * 64; }
// Bytes of a tensor; false if a dimension is negative or the size overflows int64.
bool ShapeBytes(const std::vector<int64_t>& shape, DataType t, int64_t* bytes);
std::string ShapeString(const std::vector<int64_t>& shape);
std::string RankList(const std::vector<int>& ranks);  // "[0, 2]"
std::string Ranks(const std::vector<int>& ranks);     // "rank 1" or "ranks [0, 2]"

// The outcome of an op. An error is a value until a frontend turns it into its own exception.
class Status {
 public:
  enum Code : uint8_t {
    OK = 0,
    INVALID_ARGUMENT,  // bad input detected locally (duplicate name, bad root, bad splits)
    MISMATCH,          // ranks disagree about a tensor (dtype, shape, root, op, ...)
    SHUT_DOWN,         // the engine is shut down (this rank, another rank, or stall shutdown)
    INTERNAL,          // anything else
  };
  Status() = default;
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status OK_() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(INVALID_ARGUMENT, std::move(m)); }
  static Status Mismatch(std::string m) { return Status(MISMATCH, std::move(m)); }
  static Status ShutDown(std::string m) { return Status(SHUT_DOWN, std::move(m)); }
  static Status Internal(std::string m) { return Status(INTERNAL, std::move(m)); }
  bool ok() const { return code_ == OK; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }

 private:
  Code code_ = OK;
  std::string msg_;
};

int64_t NowMicros();  // steady clock

// This machine: the kernel's boot_id, which containers on one machine share (their host names
// differ); the host name where it cannot be read.
std::string MachineId();

// One step of a polling loop: tells the core (and a hyperthread sibling) that this is a spin.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace hvd
