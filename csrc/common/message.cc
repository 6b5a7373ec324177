#include "common/message.h"

#include <cstring>
#include <sstream>
#include <tuple>
#include <type_traits>

namespace hvd {
namespace {

// How many values each enum of the spec has: a decoded value outside them is refused.
constexpr unsigned EnumCount(DataType) { return kNumDataTypes; }
constexpr unsigned EnumCount(ReduceOp) { return kNumReduceOps; }
constexpr unsigned EnumCount(OpType) { return kNumOpTypes; }

class Writer {
 public:
  template <typename T>
  void Pod(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "POD only");
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    out_.append(s);
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Pod<uint64_t>(v.size());
    for (const auto& x : v) Pod(x);
  }
  // The one encoding of an OpSpec, field by field in OpSpec::Fields() order.
  void Spec(const OpSpec& spec) {
    std::apply([this](const auto&... f) { (Field(f), ...); }, OpSpec::Fields(spec));
  }
  std::string Take() { return std::move(out_); }

 private:
  template <typename T>
  void Field(const T& v) {
    if constexpr (std::is_same<T, bool>::value)
      Pod<uint8_t>(v);  // one byte, 0 or 1
    else
      Pod(v);
  }

  std::string out_;
};

class Reader {
 public:
  Reader(const char* d, size_t n) : d_(d), n_(n) {}
  template <typename T>
  bool Pod(T* v) {
    if (n_ - pos_ < sizeof(T)) return false;
    std::memcpy(v, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Str(std::string* s) {
    uint64_t n;
    if (!Pod(&n) || n_ - pos_ < n) return false;
    s->assign(d_ + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Vec(std::vector<T>* v) {
    uint64_t n;
    if (!Pod(&n) || n > (n_ - pos_) / sizeof(T)) return false;
    v->resize(n);
    for (auto& x : *v)
      if (!Pod(&x)) return false;
    return true;
  }
  // A count of items that take at least `min_bytes` each: a garbled count is refused here
  // instead of sizing a vector from it (which would throw, or allocate gigabytes).
  bool Count(uint64_t* n, size_t min_bytes) { return Pod(n) && *n <= (n_ - pos_) / min_bytes; }
  bool Spec(OpSpec* spec) {
    return std::apply([this](auto&... f) { return (Field(&f) && ...); }, OpSpec::Fields(*spec));
  }
  bool Done() const { return pos_ == n_; }

 private:
  template <typename T>
  bool Field(T* v) {
    if constexpr (std::is_same<T, bool>::value) {
      uint8_t b = 0;
      if (!Pod(&b)) return false;
      *v = b != 0;
      return true;
    } else if constexpr (std::is_enum<T>::value) {  // a garbled or unknown value is refused
      typename std::underlying_type<T>::type u = 0;
      if (!Pod(&u) || static_cast<unsigned>(u) >= EnumCount(T())) return false;
      *v = static_cast<T>(u);
      return true;
    } else {
      return Pod(v);
    }
  }

  const char* d_;
  size_t n_, pos_ = 0;
};

}  // namespace

std::string UnsupportedReduction(const OpSpec& spec, int ranks) {
  if (!IsReduction(spec.type)) return "";
  const char* op = spec.type == OpType::ALLREDUCE ? "allreduce" : "reducescatter";
  std::ostringstream os;
  if (spec.reduce_op == ReduceOp::ADASUM) {
    // Upstream's limits, less its GPU path (NCCL within a node, Adasum across nodes).
    if (spec.type != OpType::ALLREDUCE)
      os << "reducescatter with Adasum is not supported: Adasum combines whole vectors; use "
         << "allreduce(op=Adasum)";
    else if (spec.gpu)
      os << "allreduce with Adasum on GPU is not supported: Adasum runs on host memory only; "
         << "reduce a CPU copy of the tensor";
    else if (!IsFloating(spec.dtype))
      os << "allreduce with Adasum of " << DataTypeName(spec.dtype) << " is not supported: "
         << "Adasum needs a floating-point dtype (float16, bfloat16, float32, float64)";
    else if (ranks > 0 && (ranks & (ranks - 1)) != 0)
      os << "allreduce with Adasum needs a power-of-two number of ranks, this job has " << ranks
         << " (its pairwise tree, as upstream's, has no place for the others)";
    return os.str();
  }
  if (spec.dtype == DataType::BOOL) {
    os << op << " of bool is not supported: bool tensors are moved (allgather, broadcast, "
       << "alltoall), never reduced; cast to an integer type to reduce them";
  } else if (spec.gpu && (spec.dtype == DataType::UINT16 || spec.dtype == DataType::INT16)) {
    os << op << " of " << DataTypeName(spec.dtype) << " on GPU is not supported: NCCL has no "
       << "16-bit integer type; cast to int32, or reduce the tensor on the CPU (16-bit integers "
       << "are moved on the GPU: allgather, broadcast, alltoall)";
  }
  return os.str();
}

bool Request::SameParams(const Request& o) const {
  return spec() == o.spec() && shape == o.shape && splits == o.splits && name == o.name &&
         group_size == o.group_size && group == o.group && invalid.empty() && o.invalid.empty();
}

int64_t Response::TotalBytes() const {
  int64_t n = 0;
  for (auto e : num_elements) n += e;
  return n * static_cast<int64_t>(DataTypeSize(dtype));
}

namespace {

size_t SpecBytes() {
  Writer w;
  w.Spec(OpSpec());
  return w.Take().size();
}
// The smallest encoding of a list item, for Reader::Count. A request: rank, spec, the length
// prefixes of name, shape, splits, invalid and group, and the group size. A response: spec, the
// names count, the length prefixes of num_elements, first_dims and error, its flag byte and
// its contributors.
const size_t kMinRequestBytes = 2 * sizeof(int32_t) + SpecBytes() + 5 * sizeof(uint64_t);
const size_t kMinResponseBytes = SpecBytes() + 4 * sizeof(uint64_t) + 1 + sizeof(int32_t);

}  // namespace

std::string Encode(const RequestList& l) {
  Writer w;
  w.Pod<uint8_t>(l.shutdown);
  w.Pod<uint64_t>(l.requests.size());
  for (const auto& r : l.requests) {
    w.Pod(r.rank);
    w.Spec(r);
    w.Str(r.name);
    w.Vec(r.shape);
    w.Vec(r.splits);
    w.Str(r.invalid);
    w.Str(r.group);
    w.Pod(r.group_size);
  }
  return w.Take();
}

bool Decode(const char* data, size_t size, RequestList* l) {
  Reader rd(data, size);
  uint8_t shutdown;
  uint64_t n;
  if (!rd.Pod(&shutdown) || !rd.Count(&n, kMinRequestBytes)) return false;
  l->shutdown = shutdown != 0;
  l->requests.resize(n);
  for (auto& r : l->requests) {
    if (!(rd.Pod(&r.rank) && rd.Spec(&r) && rd.Str(&r.name) && rd.Vec(&r.shape) &&
          rd.Vec(&r.splits) && rd.Str(&r.invalid) && rd.Str(&r.group) && rd.Pod(&r.group_size)))
      return false;
  }
  return rd.Done();
}

std::string Encode(const ResponseList& l) {
  Writer w;
  w.Pod<uint8_t>(l.shutdown);
  w.Str(l.shutdown_reason);
  w.Pod<uint64_t>(l.responses.size());
  for (const auto& r : l.responses) {
    w.Spec(r);
    w.Pod<uint64_t>(r.names.size());
    for (const auto& n : r.names) w.Str(n);
    w.Vec(r.num_elements);
    w.Vec(r.first_dims);
    w.Str(r.error);
    w.Pod<uint8_t>(r.error_is_invalid_argument);
    w.Pod(r.contributors);
  }
  w.Vec(l.joined);
  w.Pod<uint8_t>(l.has_params);
  if (l.has_params) {
    w.Pod(l.params.fusion_threshold);
    w.Pod(l.params.cycle_time_ms);
    w.Pod<uint8_t>(l.params.final);
  }
  return w.Take();
}

bool Decode(const char* data, size_t size, ResponseList* l) {
  Reader rd(data, size);
  uint8_t shutdown;
  uint64_t n;
  if (!rd.Pod(&shutdown) || !rd.Str(&l->shutdown_reason) || !rd.Count(&n, kMinResponseBytes))
    return false;
  l->shutdown = shutdown != 0;
  l->responses.resize(n);
  for (auto& r : l->responses) {
    uint64_t nn;
    if (!(rd.Spec(&r) && rd.Count(&nn, sizeof(uint64_t)))) return false;
    r.names.resize(nn);
    for (auto& s : r.names)
      if (!rd.Str(&s)) return false;
    uint8_t invalid_argument = 0;
    if (!(rd.Vec(&r.num_elements) && rd.Vec(&r.first_dims) && rd.Str(&r.error) &&
          rd.Pod(&invalid_argument) && rd.Pod(&r.contributors)))
      return false;
    r.error_is_invalid_argument = invalid_argument != 0;
  }
  uint8_t has_params = 0;
  if (!rd.Vec(&l->joined) || !rd.Pod(&has_params) || has_params > 1) return false;
  l->has_params = has_params != 0;
  if (l->has_params) {
    uint8_t final = 0;
    TunedParams& p = l->params;
    // Values no knob could hold are a garbled message, not a setting to apply.
    if (!(rd.Pod(&p.fusion_threshold) && rd.Pod(&p.cycle_time_ms) && rd.Pod(&final)) ||
        p.fusion_threshold < 0 || !(p.cycle_time_ms >= 0 && p.cycle_time_ms <= 1000) || final > 1)
      return false;
    p.final = final != 0;
  }
  return rd.Done();
}

}  // namespace hvd
