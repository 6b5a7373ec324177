#include "ops/gpu_placement.h"

#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace hvd {

std::string SharedGpuProblem(const std::vector<GpuPlacement>& by_rank) {
  // Ranks per (machine, bus id), in rank order; the first few shared GPUs are named.
  std::map<std::pair<std::string, std::string>, std::vector<int>> users;
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r)
    users[{by_rank[r].machine, by_rank[r].bus_id}].push_back(r);
  std::ostringstream os;
  int shared = 0;
  for (const auto& kv : users) {
    const std::vector<int>& ranks = kv.second;
    if (ranks.size() < 2) continue;
    if (++shared > 3) continue;
    os << (shared > 1 ? "; " : "") << "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i)
      os << (i == 0 ? "" : (i + 1 == ranks.size() ? " and " : ", ")) << ranks[i];
    std::set<std::string> hosts;
    for (int r : ranks) hosts.insert(by_rank[r].host);
    os << " all use GPU " << kv.first.second << " (device " << by_rank[ranks[0]].device << ") on "
       << (hosts.size() > 1 ? "the one machine of hosts " : "host ");
    for (auto it = hosts.begin(); it != hosts.end(); ++it)
      os << (it == hosts.begin() ? "" : ", ") << *it;
  }
  if (shared == 0) return std::string();
  if (shared > 3) os << "; and " << shared - 3 << " more shared GPU(s)";
  os << ". NCCL needs one GPU per rank: pin each rank's GPU from hvd.local_rank() (TensorFlow: "
        "tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU'); CuPy: "
        "cupy.cuda.Device(hvd.local_rank()).use(); torch: torch.cuda.set_device(hvd.local_rank()))"
        ", and run no more ranks on a host than it has GPUs";
  return os.str();
}

}  // namespace hvd
