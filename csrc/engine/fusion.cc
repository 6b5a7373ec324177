#include "engine/fusion.h"

#include <cstring>
#include <map>

#include "common/reduce_kernels.h"

namespace hvd {

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold) {
  // Next fit per kind, in one pass: each OpSpec (device, dtype, op, scale factors; root is 0 in
  // every frontend's allreduce) has one open group that a response joins if it fits under the
  // threshold; otherwise the group closes and a new one opens. Linear in the number of
  // responses. Groups run in the order they were opened.
  if (threshold <= 0 || responses.size() < 2) return responses;
  std::vector<Response> out;
  out.reserve(responses.size());
  std::vector<int64_t> out_bytes;
  // kind -> index in out. Responses with different contributor counts (hvd.join) never fuse:
  // Average divides each by its own.
  std::map<std::pair<OpSpec, int32_t>, size_t> open;
  for (auto& resp : responses) {
    if (resp.type != OpType::ALLREDUCE || !resp.error.empty()) {
      out.push_back(std::move(resp));
      out_bytes.push_back(0);
      continue;
    }
    const int64_t bytes = resp.TotalBytes();
    const auto kind = std::make_pair(resp.spec(), resp.contributors);
    auto it = open.find(kind);
    if (it != open.end() && out_bytes[it->second] + bytes <= threshold) {
      Response& group = out[it->second];
      group.names.push_back(std::move(resp.names[0]));
      group.num_elements.push_back(resp.num_elements[0]);
      out_bytes[it->second] += bytes;
      continue;
    }
    open[kind] = out.size();
    out_bytes.push_back(bytes);
    out.push_back(std::move(resp));
  }
  return out;
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
