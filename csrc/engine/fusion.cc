#include "engine/fusion.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <type_traits>

#include "common/reduce_kernels.h"

namespace hvd {

namespace {

// Next fit per kind, in one pass: each OpSpec (device, dtype, op, scale factors; root is 0 in
// every frontend's allreduce) has one open group that a response joins if it fits under the
// threshold; otherwise the group closes and a new one opens. Linear in the number of
// responses. Groups run in the order they were opened. T is Response (the inputs are moved
// from) or const Response (copied: a group copies its first response whole and only the name
// and count of the others). contributors >= 0 replaces every response's own.
template <typename T>
std::vector<Response> NextFit(const std::vector<T*>& in, int64_t threshold, int32_t contributors) {
  std::vector<Response> out;
  out.reserve(in.size());
  auto keep = [&](T& r) {
    if constexpr (std::is_const_v<T>)
      out.push_back(r);
    else
      out.push_back(std::move(r));
    if (contributors >= 0) out.back().contributors = contributors;
  };
  if (threshold <= 0 || in.size() < 2) {
    for (T* r : in) keep(*r);
    return out;
  }
  std::vector<int64_t> out_bytes;
  // kind -> index in out. Responses with different contributor counts (hvd.join) never fuse:
  // Average divides each by its own.
  // kNone: no group of that kind is open. The last kind's entry is kept at hand: a model's
  // gradients are mostly of one kind, and comparing one spec costs less than a map lookup.
  constexpr size_t kNone = SIZE_MAX;
  std::map<std::pair<OpSpec, int32_t>, size_t> open;
  std::pair<OpSpec, int32_t> last_kind;
  size_t* last_open = nullptr;
  for (T* rp : in) {
    T& resp = *rp;
    if (resp.type != OpType::ALLREDUCE || !resp.error.empty()) {
      keep(resp);
      out_bytes.push_back(0);
      continue;
    }
    const int64_t bytes = resp.TotalBytes();
    const auto kind =
        std::make_pair(resp.spec(), contributors >= 0 ? contributors : resp.contributors);
    if (!last_open || kind != last_kind) {
      last_open = &open.try_emplace(kind, kNone).first->second;  // map nodes do not move
      last_kind = kind;
    }
    size_t& group_at = *last_open;
    if (group_at != kNone && out_bytes[group_at] + bytes <= threshold) {
      Response& group = out[group_at];
      if constexpr (std::is_const_v<T>)
        group.names.push_back(resp.names[0]);
      else
        group.names.push_back(std::move(resp.names[0]));
      group.num_elements.push_back(resp.num_elements[0]);
      out_bytes[group_at] += bytes;
      continue;
    }
    group_at = out.size();
    out_bytes.push_back(bytes);
    keep(resp);
  }
  return out;
}

}  // namespace

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold) {
  if (threshold <= 0 || responses.size() < 2) return responses;
  std::vector<Response*> in;
  in.reserve(responses.size());
  for (auto& r : responses) in.push_back(&r);
  return NextFit(in, threshold, -1);
}

std::vector<Response> FuseCachedResponses(const std::vector<const Response*>& responses,
                                          int64_t threshold, int32_t contributors) {
  return NextFit(responses, threshold, contributors);
}

void PackFusionBuffer(const std::vector<TensorEntry>& es, const std::vector<int64_t>& num_elements,
                      DataType dtype, bool widen, void* buf) {
  const size_t esize = widen ? sizeof(int64_t) : DataTypeSize(dtype);
  char* p = static_cast<char*>(buf);
  size_t off = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    const size_t n = static_cast<size_t>(num_elements[i]);
    if (widen)
      WidenToInt64(es[i].input, dtype, reinterpret_cast<int64_t*>(p + off), n);
    else
      std::memcpy(p + off, es[i].input, n * esize);
    off += n * esize;
  }
}

void UnpackFusionBuffer(const void* buf, const std::vector<int64_t>& num_elements, DataType dtype,
                        bool widen, const std::vector<TensorEntry>& es) {
  const size_t esize = widen ? sizeof(int64_t) : DataTypeSize(dtype);
  const char* p = static_cast<const char*>(buf);
  size_t off = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    const size_t n = static_cast<size_t>(num_elements[i]);
    if (widen)
      NarrowFromInt64(reinterpret_cast<const int64_t*>(p + off), dtype, es[i].output, n);
    else
      std::memcpy(es[i].output, p + off, n * esize);
    off += n * esize;
  }
}

}  // namespace hvd
