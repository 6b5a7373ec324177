#include "engine/request_checks.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <sstream>

namespace hvd {
namespace {

std::string FormatDouble(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

// Groups ranks by the value `field` gives their request; names every group if they differ.
// Ranks are named as hvd.rank() numbers them (`net`: the process set's transport).
std::string Disagreement(const Transport& net, const std::string& name, const char* what,
                         const std::vector<Request>& reqs,
                         const std::function<std::string(const Request&)>& field) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < reqs.size(); ++r) {
    std::string v = field(reqs[r]);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
    if (it == groups.end())
      groups.push_back({v, {static_cast<int>(r)}});
    else
      it->second.push_back(static_cast<int>(r));
  }
  if (groups.size() <= 1) return "";
  std::ostringstream os;
  os << "Mismatched " << what << " for tensor '" << name << "': ";
  for (size_t i = 0; i < groups.size(); ++i)
    os << (i ? "; " : "") << "rank" << (groups[i].second.size() > 1 ? "s " : " ")
       << RankList(net.WorldRanks(groups[i].second))
       << (groups[i].second.size() > 1 ? " have " : " has ") << groups[i].first;
  return os.str();
}

// Whether every rank's request equals the first in all that ResponseFromRequests compares (the
// group, the spec, the shape or, for allgather and alltoall, the dimensions after the first):
// the usual case, answered without describing any rank's request. Equal values describe
// alike, so every Disagreement would be empty; otherwise they decide.
bool AllAgree(const std::vector<Request>& reqs) {
  const Request& f = reqs[0];
  const bool rows = f.type == OpType::ALLGATHER || f.type == OpType::ALLTOALL;
  for (const Request& r : reqs) {
    if (r.group_size != f.group_size || r.group != f.group || r.spec() != f.spec()) return false;
    if (!rows && r.shape != f.shape) return false;
    if (rows && (r.shape.size() != f.shape.size() || r.shape.empty() ||
                 !std::equal(r.shape.begin() + 1, r.shape.end(), f.shape.begin() + 1)))
      return false;
  }
  return true;
}

std::string TrailingDims(const Request& r) {
  std::vector<int64_t> rest(r.shape.begin() + (r.shape.empty() ? 0 : 1), r.shape.end());
  return "dimensions after the first " + ShapeString(rest);
}

// Allgather and alltoall outputs are sized from other ranks' first dimensions and splits: the
// total a rank receives must fit in int64 bytes, or its allocation would wrap to a small buffer.
// Checked here, where every rank's request is known, so that every rank gets the error.
std::string CheckReceivedBytes(const Transport& net, const std::string& name,
                               const std::vector<Request>& reqs) {
  const Request& first = reqs[0];
  int64_t row_bytes = 0;
  std::vector<int64_t> row(first.shape.begin() + 1, first.shape.end());
  if (!ShapeBytes(row, first.dtype, &row_bytes)) row_bytes = INT64_MAX;
  const int n = static_cast<int>(reqs.size());
  for (int dst = 0; dst < n; ++dst) {
    int64_t rows = 0, bytes = 0;
    bool ok = true;
    for (int src = 0; src < n && ok; ++src) {
      const Request& r = reqs[src];
      int64_t part = first.type == OpType::ALLGATHER ? r.shape[0] : r.splits[dst];
      ok = CheckedAdd(rows, part, &rows);
    }
    if (ok) ok = CheckedMul(rows, row_bytes, &bytes);
    if (!ok) {
      std::ostringstream os;
      os << "tensor '" << name << "': the " << OpTypeName(first.type) << " output";
      if (first.type == OpType::ALLTOALL) os << " of rank " << net.WorldRank(dst);
      os << " would hold more bytes than fit in int64 (";
      if (first.type == OpType::ALLGATHER) {
        os << "first dimensions:";
        for (int src = 0; src < n; ++src)
          os << " rank " << net.WorldRank(src) << " " << reqs[src].shape[0]
             << (src + 1 < n ? "," : "");
      } else {
        os << "rows sent to it:";
        for (int src = 0; src < n; ++src)
          os << " rank " << net.WorldRank(src) << " " << reqs[src].splits[dst]
             << (src + 1 < n ? "," : "");
      }
      os << ")";
      return os.str();
    }
    if (first.type == OpType::ALLGATHER) break;  // every rank receives the same total
  }
  return "";
}

// Every rank's own reason its request is unusable, "on rank <r>: <reason>" joined by "; ", or "".
std::string InvalidOnRanks(const Transport& net, const std::vector<Request>& reqs) {
  std::string invalid;
  for (size_t r = 0; r < reqs.size(); ++r)
    if (!reqs[r].invalid.empty())
      invalid += (invalid.empty() ? "" : "; ") + std::string("on rank ") +
                 std::to_string(net.WorldRank(static_cast<int>(r))) + ": " + reqs[r].invalid;
  return invalid;
}

// Every rank must name the same set; whether it can be added or removed is decided where it
// runs (runtime_changes.cc), identically everywhere, from the sets every rank holds.
std::string ProcessSetChangeDisagreement(const Transport& net, const std::string& name,
                                         const std::vector<Request>& reqs) {
  std::string err = Disagreement(net, name, "operations", reqs,
                                 [](const Request& r) { return std::string(OpTypeName(r.type)); });
  if (err.empty())
    err = reqs[0].type == OpType::ADD_PROCESS_SET
              ? Disagreement(net, name, "process set ranks", reqs,
                             [](const Request& r) { return "ranks " + ShapeString(r.splits); })
              : Disagreement(net, name, "process set ids", reqs,
                             [](const Request& r) { return "id " + std::to_string(r.root); });
  return err;
}

// The first of the group size, op, device, dtype, reduce op and scale factors that the ranks
// disagree on, or "". A group's size first: members at one index of groups of different sizes
// are different tensors, so their other differences would only mislead.
std::string SpecDisagreement(const Transport& net, const std::string& name,
                             const std::vector<Request>& reqs) {
  std::string err = Disagreement(net, name, "group sizes", reqs, [](const Request& r) {
    return r.group.empty() ? std::string("it outside a group")
                           : std::to_string(r.group_size) + " tensor" +
                                 (r.group_size == 1 ? "" : "s") + " in group '" + r.group + "'";
  });
  if (err.empty())
    err = Disagreement(net, name, "operations", reqs,
                       [](const Request& r) { return std::string(OpTypeName(r.type)); });
  if (err.empty())
    err = Disagreement(net, name, "devices (host or GPU memory)", reqs,
                       [](const Request& r) { return std::string(r.gpu ? "GPU" : "host"); });
  if (err.empty())
    err = Disagreement(net, name, "data types", reqs,
                       [](const Request& r) { return std::string(DataTypeName(r.dtype)); });
  const OpType t = reqs[0].type;
  const bool reduces = t == OpType::ALLREDUCE || t == OpType::REDUCESCATTER;
  if (err.empty() && reduces)
    err = Disagreement(net, name, "reduction operations", reqs,
                       [](const Request& r) { return std::string(ReduceOpName(r.reduce_op)); });
  if (err.empty() && reduces)
    err = Disagreement(net, name, "prescale/postscale factors", reqs, [](const Request& r) {
      return "prescale " + FormatDouble(r.prescale) + ", postscale " + FormatDouble(r.postscale);
    });
  return err;
}

// The first of the shape (the dimensions after the first, for allgather and alltoall) and the
// broadcast root that the ranks disagree on, or "".
std::string LayoutDisagreement(const Transport& net, const std::string& name,
                               const std::vector<Request>& reqs) {
  const OpType t = reqs[0].type;
  std::string err;
  if (t == OpType::ALLREDUCE || t == OpType::BROADCAST || t == OpType::REDUCESCATTER)
    err = Disagreement(net, name, "shapes", reqs,
                       [](const Request& r) { return "shape " + ShapeString(r.shape); });
  if (err.empty() && t == OpType::BROADCAST)
    err = Disagreement(net, name, "broadcast root ranks", reqs, [&net](const Request& r) {
      return "root " + std::to_string(net.WorldRank(r.root));
    });
  if (err.empty() && (t == OpType::ALLGATHER || t == OpType::ALLTOALL))
    err = Disagreement(net, name, "shapes (all dimensions but the first must agree)", reqs,
                       TrailingDims);
  return err;
}

}  // namespace

std::string InvalidArguments(const Request& r, int n) {
  int64_t bytes = 0;
  if (!ShapeBytes(r.shape, r.dtype, &bytes))
    return "shape " + ShapeString(r.shape) +
           " has a negative dimension or more bytes than fit in int64";
  const bool needs_rows =
      r.type == OpType::ALLGATHER || r.type == OpType::ALLTOALL || r.type == OpType::REDUCESCATTER;
  if (needs_rows && r.shape.empty())
    return std::string(OpTypeName(r.type)) +
           " needs a tensor with at least one dimension, got a scalar";
  if (r.type == OpType::BROADCAST && (r.root < 0 || r.root >= n))
    return "broadcast root rank " + std::to_string(r.root) + " is outside [0, " +
           std::to_string(n) + ")";
  if (r.type == OpType::ALLTOALL) {
    // Checked sum: splits near 2^63 must not wrap around to the right total.
    int64_t total = 0;
    bool bad = static_cast<int>(r.splits.size()) != n;
    for (auto sp : r.splits) bad = bad || sp < 0 || !CheckedAdd(total, sp, &total);
    if (bad || total != r.shape[0])
      return "alltoall needs one non-negative split per rank (" + std::to_string(n) +
             ") summing to the first dimension (" + std::to_string(r.shape[0]) + "), got " +
             ShapeString(r.splits);
  }
  return "";
}

Response ResponseFromRequests(const Transport& net, const std::string& name,
                              const std::vector<Request>& reqs, int join_root) {
  const Request& first = reqs[0];
  Response resp;
  resp.spec() = first.spec();
  resp.names = {name};
  resp.num_elements = {NumElements(first.shape)};
  if (first.type == OpType::JOIN) {
    resp.root = net.WorldRank(join_root);
    return resp;
  }

  // A rank's own bad arguments come first: nothing else about its request can be trusted.
  const std::string invalid = InvalidOnRanks(net, reqs);
  if (!invalid.empty()) {
    resp.error =
        "Invalid arguments for tensor '" + name + "' " + invalid + " (the op fails on every rank)";
    resp.error_is_invalid_argument = true;
    return resp;
  }
  if (first.type == OpType::ADD_PROCESS_SET || first.type == OpType::REMOVE_PROCESS_SET) {
    resp.error = ProcessSetChangeDisagreement(net, name, reqs);
    if (resp.error.empty()) resp.first_dims = first.splits;
    return resp;
  }
  const bool agree = AllAgree(reqs);
  std::string err = agree ? "" : SpecDisagreement(net, name, reqs);
  // The ranks agree on the op, dtype and factors: whether the engine can run that at all is
  // decided here, once, so that every rank fails alike (a bool reduction, integer scaling).
  if (err.empty()) {
    const std::string why = UnsupportedReduction(first.spec(), net.size);
    if (!why.empty()) {
      resp.error = "tensor '" + name + "': " + why;
      resp.error_is_invalid_argument = true;
      return resp;
    }
  }
  if (!agree && err.empty()) err = LayoutDisagreement(net, name, reqs);
  const OpType t = first.type;
  if (err.empty() && (t == OpType::ALLGATHER || t == OpType::ALLTOALL)) {
    err = CheckReceivedBytes(net, name, reqs);
    resp.error_is_invalid_argument = !err.empty();  // the inputs, not a disagreement
  }
  if (!err.empty()) {
    resp.error = err;
    return resp;
  }
  if (t == OpType::ALLGATHER)
    for (const auto& r : reqs) resp.first_dims.push_back(r.shape.empty() ? 0 : r.shape[0]);
  return resp;
}

Response ResponseWithJoinedRanks(const Transport& net, const std::string& name,
                                 const std::vector<Request>& reqs, const std::vector<bool>& present,
                                 const std::vector<int>& joined) {
  // Checked among the ranks that submitted it, more coarsely than ResponseFromRequests: any
  // difference in spec, shape or group is one error listing the submitters and the joined.
  std::vector<const Request*> submitted;
  std::vector<int> ranks;
  for (int r = 0; r < net.size; ++r)
    if (present[r]) {
      ranks.push_back(r);
      submitted.push_back(&reqs[r]);
    }
  const Request& first = *submitted[0];
  Response resp;
  resp.spec() = first.spec();
  resp.names = {name};
  resp.num_elements = {NumElements(first.shape)};
  std::ostringstream why;
  if (first.type != OpType::ALLREDUCE || first.gpu) {
    why << "tensor '" << name << "': " << (first.gpu ? "GPU " : "") << OpTypeName(first.type)
        << " cannot run while rank" << (joined.size() > 1 ? "s " : " ")
        << RankList(net.WorldRanks(joined)) << " ha" << (joined.size() > 1 ? "ve" : "s")
        << " joined (hvd.join): only host-memory allreduce takes zeros from joined ranks";
    resp.error = why.str();
    resp.error_is_invalid_argument = true;
    return resp;
  }
  for (size_t i = 1; i < submitted.size(); ++i)
    if (submitted[i]->spec() != first.spec() || submitted[i]->shape != first.shape ||
        !submitted[i]->invalid.empty() || !first.invalid.empty() ||
        submitted[i]->group_size != first.group_size) {
      why << "tensor '" << name << "': ranks " << RankList(net.WorldRanks(ranks))
          << " submitted it while ranks " << RankList(net.WorldRanks(joined))
          << " have joined, and they disagree on it (op, dtype, shape, scale factors or group)";
      resp.error = why.str();
      return resp;
    }
  if (!first.invalid.empty()) {
    resp.error = "Invalid arguments for tensor '" + name + "': " + first.invalid;
    resp.error_is_invalid_argument = true;
    return resp;
  }
  const std::string unsupported = UnsupportedReduction(first.spec(), net.size);
  if (!unsupported.empty()) {
    resp.error = "tensor '" + name + "': " + unsupported;
    resp.error_is_invalid_argument = true;
    return resp;
  }
  resp.contributors = static_cast<int>(submitted.size());
  return resp;
}

}  // namespace hvd
