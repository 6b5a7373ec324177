// The one way frontends turn an op's arguments into wire requests (engine.h: OpArgs).
#include <utility>

#include "engine/engine.h"

namespace hvd {

std::string MemberName(const std::string& name, int i, int n, bool grouped) {
  if (!grouped && n == 1) return name;
  return name + "." + std::to_string(i);
}

std::string MemberName(const OpArgs& op, int i, int n) {
  if (!op.names.empty()) return op.names[static_cast<size_t>(i)];
  return MemberName(op.name, i, n, op.grouped);
}

Request MakeRequest(const OpArgs& op, int i, int n, DataType dtype, std::vector<int64_t> shape) {
  Request r;
  r.type = op.type;
  r.dtype = dtype;
  r.reduce_op = op.reduce_op;
  r.root = op.root;
  r.prescale = op.prescale;
  r.postscale = op.postscale;
  r.gpu = op.gpu;
  r.rank = GetTopology().rank;  // Enqueue makes it the rank in the op's process set
  r.name = MemberName(op, i, n);
  r.shape = std::move(shape);
  r.splits = op.splits;
  r.invalid = op.invalid;
  if (op.grouped) {
    r.group = op.name;
    r.group_size = n;
  }
  return r;
}

}  // namespace hvd
