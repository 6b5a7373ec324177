#include "engine/job_stats.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>

namespace hvd {
namespace {

// A rank that waits this many points of wall time less than the median holds the others up;
// closer than that, calling it a straggler would blame noise.
constexpr double kStragglerPoints = 5.0;
// Below this share of the slowest link's bandwidth the summary looks for a cause (as the
// network doctor does, horovod/runner/task/network_check.py REACH_FLOOR).
constexpr double kReachFloor = 0.5;
// Allreduces smaller than this on average spend their time in latency: at 1 GB/s a 1 MiB
// allreduce moves data for about 1 ms, against link latencies of 0.05-0.2 ms per ring step.
constexpr int64_t kLatencyBoundBytes = 1 << 20;
// Links carrying less than this share of their one-at-a-time figure when all are busy at once
// slow each other down (the check's AT_ONCE_FLOOR, runner/task/network_report.py).
constexpr double kAtOnceFloor = 0.7;

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return u ? Format("%.1f %s", v, units[u]) : Format("%lld B", static_cast<long long>(bytes));
}

int64_t WallMicros(const JobStats& s) { return std::max<int64_t>(1, s.end_us - s.start_us); }
double Percent(int64_t us, const JobStats& s) { return 100.0 * us / WallMicros(s); }
// Share of its wall time a rank spent waiting for communication: a straggler waits least.
double Waited(const JobStats& s) { return Percent(s.collective_us + s.negotiation_us, s); }

// Allreduce bus bandwidth in GB/s, the ring's measure: each rank sends and receives
// 2(n-1)/n of the buffer, whatever the algorithm. Negative: no allreduce time to divide by.
double BusBandwidth(const JobStats& s, int n) {
  if (s.allreduce_us <= 0 || n < 2) return -1;
  return (s.bytes_reduced - s.bytes_eager) * (2.0 * (n - 1) / n) / (s.allreduce_us * 1e-6) / 1e9;
}

// Two decimals, or two significant digits below 0.01 (small tensors over slow links).
std::string GBps(double v) { return Format(v >= 0.01 ? "%.2f GB/s" : "%.2g GB/s", v); }

std::string Plural(int64_t n, const char* word) {
  return Format("%lld %s%s", static_cast<long long>(n), word, n == 1 ? "" : "s");
}

// The job's allreduce against the slowest link between its hosts (link_gbps, measured by
// horovodrun --check-network): a flat ring's bus bandwidth cannot pass its slowest link, so the
// ratio says how much of the network the job used, and below kReachFloor the causes the counters
// can show are named. busbw < 0: no allreduce ran. ranks_per_host: the job's hosts and their
// rank counts. at_once_gbps > 0: the slowest link with all of them busy at once (a ring's real
// bound where hosts share CPUs or a NIC).
std::string LinkLine(const std::vector<JobStats>& ranks, double busbw, double link_gbps,
                     double at_once_gbps, const std::map<std::string, int>& ranks_per_host,
                     int slow_rank) {
  const std::string link = "slowest link " + GBps(link_gbps) + " (HOROVOD_LINK_GBPS)";
  if (ranks_per_host.size() < 2)
    return "links: " + link + ", but every rank ran on one host: no link carried the allreduce";
  if (busbw < 0) return "links: " + link + "; no allreduce ran to compare with it";
  const double reach = busbw / link_gbps;
  std::string line = Format("allreduce reaches %.0f %% of what the links allow (bus bandwidth %s; ",
                            100 * reach, GBps(busbw).c_str()) +
                     link + ")";
  if (at_once_gbps > 0)
    line += Format(", %.0f %% of what they carry all at once (%s (HOROVOD_LINK_AT_ONCE_GBPS))",
                   100 * busbw / at_once_gbps, GBps(at_once_gbps).c_str());
  if (reach >= kReachFloor) return line;
  const JobStats& root = ranks[0];
  int64_t runs = 0;
  for (int64_t r : root.allreduce_runs) runs += r;
  std::vector<std::string> causes;
  if (runs > 0 && root.bytes_reduced / runs < kLatencyBoundBytes)
    causes.push_back(
        "allreduces of " + HumanBytes(root.bytes_reduced / runs) +
        " on average are bound by latency, not bandwidth (fusion packs small tensors into "
        "fewer: HOROVOD_FUSION_THRESHOLD, and HOROVOD_CYCLE_TIME for how long it gathers them)");
  if (at_once_gbps > 0 && at_once_gbps < kAtOnceFloor * link_gbps)
    causes.push_back(
        Format("the links slow each other down: all busy at once, as a ring keeps "
               "them, they carry %.0f %% of what one gets alone (hosts that share "
               "one machine's CPUs, or one NIC): no allreduce gets more from them",
               100 * at_once_gbps / link_gbps));
  const bool crowded =
      std::any_of(ranks_per_host.begin(), ranks_per_host.end(),
                  [](const std::pair<const std::string, int>& h) { return h.second > 1; });
  if (crowded && root.allreduce_runs[JobStats::kHierarchical] == 0)
    causes.push_back("the hierarchical allreduce did not run (the algorithms line says why)");
  if (slow_rank >= 0)
    causes.push_back(
        Format("rank %d holds the others up (the slowest rank line): its time "
               "outside communication, not the network",
               slow_rank));
  if (causes.empty())
    causes.push_back(
        "none these counters show: horovodrun --check-network names oversubscribed machines, "
        "a small /dev/shm and slow links");
  line += "; likely cause: " + causes[0];
  for (size_t i = 1; i < causes.size(); ++i) line += "; and " + causes[i];
  return line;
}

// What the summary's lines read of every rank, in rank order.
struct RankFigures {
  std::vector<std::string> hosts;
  std::vector<double> collective_pct, negotiation_pct, waited_pct;
  std::vector<double> busbw;  // of the ranks that spent time in allreduce only
  int64_t wall_us = 0, min_reduced = 0, max_reduced = 0;
};

RankFigures Figures(const std::vector<JobStats>& ranks) {
  const int n = static_cast<int>(ranks.size());
  RankFigures f;
  f.min_reduced = f.max_reduced = ranks[0].bytes_reduced;
  for (const JobStats& s : ranks) {
    f.hosts.emplace_back(s.host, strnlen(s.host, sizeof(s.host)));  // untrusted: may lack a NUL
    f.collective_pct.push_back(Percent(s.collective_us, s));
    f.negotiation_pct.push_back(Percent(s.negotiation_us, s));
    f.waited_pct.push_back(Waited(s));
    if (BusBandwidth(s, n) >= 0) f.busbw.push_back(BusBandwidth(s, n));
    f.wall_us = std::max(f.wall_us, WallMicros(s));
    f.min_reduced = std::min(f.min_reduced, s.bytes_reduced);
    f.max_reduced = std::max(f.max_reduced, s.bytes_reduced);
  }
  return f;
}

// The job at a glance: ranks, hosts, transport, wall time, collectives and bytes reduced.
std::string JobLine(const std::vector<JobStats>& ranks, const RankFigures& f, int64_t host_count,
                    const std::string& transport) {
  const int n = static_cast<int>(ranks.size());
  const JobStats& root = ranks[0];
  // Every rank runs the same responses, so rank 0's counts are the job's; reduced bytes are
  // compared anyway, since a difference means ranks did not run the same allreduces.
  const std::string reduced =
      f.min_reduced == f.max_reduced
          ? Format("%lld bytes reduced per rank (%s)", static_cast<long long>(f.min_reduced),
                   HumanBytes(f.min_reduced).c_str())
          : Format("between %lld (%s) and %lld (%s) bytes reduced per rank (ranks differ)",
                   static_cast<long long>(f.min_reduced), HumanBytes(f.min_reduced).c_str(),
                   static_cast<long long>(f.max_reduced), HumanBytes(f.max_reduced).c_str());
  const std::string over = transport.empty() ? "" : " over " + transport;
  return Format("%s on %s%s, %.1f s: %s (%s); %s", Plural(n, "rank").c_str(),
                Plural(host_count, "host").c_str(), over.c_str(), f.wall_us * 1e-6,
                Plural(root.collectives, "collective").c_str(),
                Plural(root.tensors, "tensor").c_str(), reduced.c_str());
}

// Time in collectives and negotiation, and the allreduce bus bandwidth (medians over ranks).
std::string TimeLine(const JobStats& root, const RankFigures& f, int n) {
  const std::string bandwidth =
      n == 1 ? "n/a (1 rank)"
      : f.busbw.empty()
          ? (root.bytes_eager > 0 ? "n/a (every allreduce was eager: its data moved in "
                                    "the negotiation rounds)"
                                  : "n/a (no allreduce)")
          : GBps(Median(f.busbw));
  return Format(
      "time in collectives %.1f %% of wall time (plus negotiation %.1f %%), "
      "median over ranks; allreduce bus bandwidth %s",
      Median(f.collective_pct), Median(f.negotiation_pct), bandwidth.c_str());
}

// Which algorithms ran (rank 0's counts: every rank runs the same responses), and why the
// hierarchical ones were on or off.
std::string AlgorithmsLine(const JobStats& root) {
  static const char* const kAllreduce[JobStats::kAllreduceAlgorithms] = {
      "MPI_Allreduce", "direct", "ring", "Adasum", "hierarchical", "eager"};
  static const char* const kAllgather[2] = {"ring", "hierarchical"};
  std::string algos;
  for (int a = 0; a < JobStats::kAllreduceAlgorithms; ++a)
    if (root.allreduce_runs[a] > 0)
      algos += Format("%s%s %lld", algos.empty() ? "allreduce " : ", ", kAllreduce[a],
                      static_cast<long long>(root.allreduce_runs[a]));
  std::string gathers;
  for (int a = 0; a < 2; ++a)
    if (root.allgather_runs[a] > 0)
      gathers += Format("%s%s %lld", gathers.empty() ? "allgather " : ", ", kAllgather[a],
                        static_cast<long long>(root.allgather_runs[a]));
  if (!gathers.empty()) algos += (algos.empty() ? "" : "; ") + gathers;
  return "algorithms: " + (algos.empty() ? std::string("none ran") : algos) + "; " +
         std::string(root.hierarchy, strnlen(root.hierarchy, sizeof(root.hierarchy)));
}

// The rank that waited least; *slow_rank: that rank if the others wait for it, else -1.
std::string SlowestRankLine(const RankFigures& f, int* slow_rank) {
  const std::vector<double>& waited = f.waited_pct;
  const int slowest =
      static_cast<int>(std::min_element(waited.begin(), waited.end()) - waited.begin());
  const double median = Median(waited);
  *slow_rank = median - waited[slowest] >= kStragglerPoints ? slowest : -1;
  return Format(
      "slowest rank: %d on %s (waited %.1f %% of its time in collectives and negotiation, "
      "median %.1f %%): %s",
      slowest, f.hosts[slowest].c_str(), waited[slowest], median,
      *slow_rank >= 0 ? "the others wait for it"
                      : "ranks are balanced, none waits notably for another");
}

// Level 2: one rank's own figures.
std::string RankLine(const JobStats& s, const RankFigures& f, int r, int n) {
  const double bw = BusBandwidth(s, n);
  return Format(
      "rank %d on %s: %s, %lld bytes reduced, collectives %.1f %% "
      "(plus negotiation %.1f %%), allreduce busbw %s",
      r, f.hosts[r].c_str(), Plural(s.collectives, "collective").c_str(),
      static_cast<long long>(s.bytes_reduced), f.collective_pct[r], f.negotiation_pct[r],
      bw >= 0 ? GBps(bw).c_str() : "n/a");
}

}  // namespace

void JobStats::RecordCollective(const Response& r, bool ok, int64_t payload_bytes, int64_t us) {
  const bool eager = !r.eager_parts.empty();
  collective_us += us;
  if (r.type == OpType::ALLREDUCE && !eager) allreduce_us += us;
  if (!ok) return;
  ++collectives;
  tensors += static_cast<int64_t>(r.names.size());
  bytes_total += payload_bytes;
  if (r.type == OpType::ALLREDUCE) bytes_reduced += payload_bytes;
  if (eager) bytes_eager += payload_bytes;
}

void JobStats::SetHost(const std::string& name) {
  std::memset(host, 0, sizeof(host));
  std::memcpy(host, name.data(), std::min(name.size(), sizeof(host) - 1));
}

void JobStats::SetHierarchyNote(const std::string& note) {
  std::memset(hierarchy, 0, sizeof(hierarchy));
  std::memcpy(hierarchy, note.data(), std::min(note.size(), sizeof(hierarchy) - 1));
}

std::vector<std::string> SummaryLines(const std::vector<JobStats>& ranks, int level,
                                      double link_gbps, double link_at_once_gbps,
                                      const std::string& transport) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::string> lines;
  if (n == 0) return lines;
  const RankFigures f = Figures(ranks);
  std::map<std::string, int> ranks_per_host;
  for (const std::string& h : f.hosts) ++ranks_per_host[h];
  lines.push_back(JobLine(ranks, f, static_cast<int64_t>(ranks_per_host.size()), transport));
  lines.push_back(TimeLine(ranks[0], f, n));
  if (n > 1) lines.push_back(AlgorithmsLine(ranks[0]));
  int slow_rank = -1;  // a rank the others wait for, if one stands out
  if (n > 1) lines.push_back(SlowestRankLine(f, &slow_rank));
  if (link_gbps > 0 && n > 1)
    lines.push_back(LinkLine(ranks, f.busbw.empty() ? -1 : Median(f.busbw), link_gbps,
                             link_at_once_gbps, ranks_per_host, slow_rank));
  if (level >= 2)
    for (int r = 0; r < n; ++r) lines.push_back(RankLine(ranks[r], f, r, n));
  return lines;
}

void PrintSummary(const std::vector<std::string>& lines) {
  for (const auto& line : lines) {
    // One write per line, so lines of other ranks' logs do not cut into it.
    const std::string out = "[horovod summary] " + line + "\n";
    std::fwrite(out.data(), 1, out.size(), stderr);
    std::fflush(stderr);
  }
}

}  // namespace hvd
