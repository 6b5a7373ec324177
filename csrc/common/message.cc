#include "common/message.h"

#include <cstring>
#include <type_traits>

namespace hvd {
namespace {

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
  std::string Take() { return std::move(out_); }

 private:
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
  bool Done() const { return pos_ == n_; }

 private:
  const char* d_;
  size_t n_, pos_ = 0;
};

}  // namespace

bool Request::SameParams(const Request& o) const {
  return type == o.type && dtype == o.dtype && reduce_op == o.reduce_op && root == o.root &&
         prescale == o.prescale && postscale == o.postscale && shape == o.shape &&
         splits == o.splits && name == o.name && gpu == o.gpu && invalid.empty() && o.invalid.empty();
}

int64_t Response::TotalBytes() const {
  int64_t n = 0;
  for (auto e : num_elements) n += e;
  return n * static_cast<int64_t>(DataTypeSize(dtype));
}

std::string Encode(const RequestList& l) {
  Writer w;
  w.Pod<uint8_t>(l.shutdown);
  w.Pod<uint64_t>(l.requests.size());
  for (const auto& r : l.requests) {
    w.Pod(r.rank); w.Pod(r.type); w.Pod(r.dtype); w.Pod(r.reduce_op); w.Pod(r.root);
    w.Pod(r.prescale); w.Pod(r.postscale);
    w.Str(r.name); w.Vec(r.shape); w.Vec(r.splits); w.Str(r.invalid);
    w.Pod<uint8_t>(r.gpu);
  }
  return w.Take();
}

bool Decode(const char* data, size_t size, RequestList* l) {
  Reader rd(data, size);
  uint8_t shutdown;
  uint64_t n;
  if (!rd.Pod(&shutdown) || !rd.Pod(&n)) return false;
  l->shutdown = shutdown != 0;
  l->requests.resize(n);
  for (auto& r : l->requests) {
    if (!(rd.Pod(&r.rank) && rd.Pod(&r.type) && rd.Pod(&r.dtype) && rd.Pod(&r.reduce_op) &&
          rd.Pod(&r.root) && rd.Pod(&r.prescale) && rd.Pod(&r.postscale) && rd.Str(&r.name) &&
          rd.Vec(&r.shape) && rd.Vec(&r.splits) && rd.Str(&r.invalid)))
      return false;
    uint8_t gpu = 0;
    if (!rd.Pod(&gpu)) return false;
    r.gpu = gpu != 0;
  }
  return rd.Done();
}

std::string Encode(const ResponseList& l) {
  Writer w;
  w.Pod<uint8_t>(l.shutdown);
  w.Str(l.shutdown_reason);
  w.Pod<uint64_t>(l.responses.size());
  for (const auto& r : l.responses) {
    w.Pod(r.type); w.Pod(r.dtype); w.Pod(r.reduce_op); w.Pod(r.root);
    w.Pod(r.prescale); w.Pod(r.postscale);
    w.Pod<uint64_t>(r.names.size());
    for (const auto& n : r.names) w.Str(n);
    w.Vec(r.num_elements); w.Vec(r.first_dims); w.Str(r.error);
    w.Pod<uint8_t>(r.error_is_invalid_argument);
    w.Pod<uint8_t>(r.gpu);
  }
  return w.Take();
}

bool Decode(const char* data, size_t size, ResponseList* l) {
  Reader rd(data, size);
  uint8_t shutdown;
  uint64_t n;
  if (!rd.Pod(&shutdown) || !rd.Str(&l->shutdown_reason) || !rd.Pod(&n)) return false;
  l->shutdown = shutdown != 0;
  l->responses.resize(n);
  for (auto& r : l->responses) {
    uint64_t nn;
    if (!(rd.Pod(&r.type) && rd.Pod(&r.dtype) && rd.Pod(&r.reduce_op) && rd.Pod(&r.root) &&
          rd.Pod(&r.prescale) && rd.Pod(&r.postscale) && rd.Pod(&nn)))
      return false;
    r.names.resize(nn);
    for (auto& s : r.names)
      if (!rd.Str(&s)) return false;
    uint8_t invalid_argument = 0, gpu = 0;
    if (!(rd.Vec(&r.num_elements) && rd.Vec(&r.first_dims) && rd.Str(&r.error) &&
          rd.Pod(&invalid_argument) && rd.Pod(&gpu)))
      return false;
    r.error_is_invalid_argument = invalid_argument != 0;
    r.gpu = gpu != 0;
  }
  return rd.Done();
}

}  // namespace hvd
