// The end-of-job summary's comparison with the slowest measured link (engine/job_stats.h,
// HOROVOD_LINK_GBPS): what it says on one host, at full speed, and the causes it names below
// half of the link; and how eager allreduces are counted. Counters are made up: the engine tests
// run the real summary on one host.
#include "engine/job_stats.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hvd {
namespace {

// `n` ranks spread over `hosts` host names, each having reduced `bytes` in `runs` ring
// allreduces taking `us` microseconds of a 10 s job.
std::vector<JobStats> Job(int n, int hosts, int64_t bytes, int64_t runs, int64_t us) {
  std::vector<JobStats> ranks(n);
  for (int r = 0; r < n; ++r) {
    JobStats& s = ranks[r];
    s.start_us = 0;
    s.end_us = 10 * 1000000;
    s.collectives = runs;
    s.tensors = runs;
    s.bytes_reduced = s.bytes_total = bytes;
    s.collective_us = s.allreduce_us = us;
    s.allreduce_runs[2] = runs;  // ring
    s.SetHost("host" + std::to_string(r * hosts / n));
  }
  return ranks;
}

// The summary line about links, or "" when there is none.
std::string LinkLine(const std::vector<std::string>& lines) {
  for (const std::string& l : lines)
    if (l.find("HOROVOD_LINK_GBPS") != std::string::npos) return l;
  return "";
}

TEST(JobStatsLinks, NothingWithoutAMeasuredLink) {
  EXPECT_EQ(LinkLine(SummaryLines(Job(2, 2, 1 << 30, 10, 1000000), 1)), "");
}

TEST(JobStatsLinks, OneHostHasNoLinkToCompare) {
  const std::string l = LinkLine(SummaryLines(Job(2, 1, 1 << 30, 10, 1000000), 1, 1.0));
  EXPECT_NE(l.find("every rank ran on one host"), std::string::npos) << l;
}

TEST(JobStatsLinks, FullSpeedNamesNoCause) {
  // 2 ranks: busbw = bytes / time = 1 GiB / 1 s = 1.07 GB/s against a 1.25 GB/s link.
  const std::string l = LinkLine(SummaryLines(Job(2, 2, 1 << 30, 10, 1000000), 1, 1.25));
  EXPECT_NE(l.find("allreduce reaches 86 % of what the links allow (bus bandwidth 1.07 GB/s; "
                   "slowest link 1.25 GB/s (HOROVOD_LINK_GBPS))"),
            std::string::npos)
      << l;
  EXPECT_EQ(l.find("cause"), std::string::npos) << l;
}

TEST(JobStatsLinks, LinksThatSlowEachOtherDownAreNamed) {
  // 2 ranks, 0.43 GB/s: 34 % of a 1.25 GB/s link alone, 86 % of the 0.5 GB/s all at once.
  const std::string l = LinkLine(SummaryLines(Job(2, 2, 1 << 30, 10, 2500000), 1, 1.25, 0.5));
  EXPECT_NE(l.find("allreduce reaches 34 % of what the links allow (bus bandwidth 0.43 GB/s; "
                   "slowest link 1.25 GB/s (HOROVOD_LINK_GBPS)), 86 % of what they carry all at "
                   "once (0.50 GB/s (HOROVOD_LINK_AT_ONCE_GBPS)); likely cause: the links slow "
                   "each other down: all busy at once, as a ring keeps them, they carry 40 % of "
                   "what one gets alone"),
            std::string::npos)
      << l;
  // Links that keep their speed at once (separate hosts): compared, but no such cause.
  const std::string apart = LinkLine(SummaryLines(Job(2, 2, 1 << 30, 10, 2500000), 1, 1.25, 1.2));
  EXPECT_NE(apart.find("36 % of what they carry all at once"), std::string::npos) << apart;
  EXPECT_EQ(apart.find("slow each other"), std::string::npos) << apart;
}

TEST(JobStatsLinks, SmallAllreducesAreCalledLatencyBound) {
  // 1000 allreduces of 64 KiB in 1 s: 0.066 GB/s against 1 GB/s.
  const std::string l = LinkLine(SummaryLines(Job(2, 2, 64000 * 1000, 1000, 1000000), 1, 1.0));
  EXPECT_NE(l.find("reaches 6 %"), std::string::npos) << l;
  EXPECT_NE(l.find("likely cause: allreduces of 62.5 KiB on average are bound by latency"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("HOROVOD_FUSION_THRESHOLD"), std::string::npos) << l;
  EXPECT_EQ(l.find("hierarchical"), std::string::npos) << l;  // one rank per host
}

TEST(JobStatsLinks, FlatRingOverSeveralRanksPerHostIsNamed) {
  // 4 ranks on 2 hosts, large allreduces, all flat ring, 10 % of the link.
  const std::string l = LinkLine(SummaryLines(Job(4, 2, 1 << 30, 10, 10000000), 1, 1.0));
  EXPECT_NE(l.find("likely cause: the hierarchical allreduce did not run"), std::string::npos) << l;
  EXPECT_EQ(l.find("latency"), std::string::npos) << l;
}

TEST(JobStatsLinks, AStragglerIsNamedAndOtherwiseTheDoctorIsSuggested) {
  std::vector<JobStats> job = Job(2, 2, 1 << 30, 10, 8000000);
  std::string l = LinkLine(SummaryLines(job, 1, 1.0));
  EXPECT_NE(l.find("likely cause: none these counters show: horovodrun --check-network"),
            std::string::npos)
      << l;
  job[0].negotiation_us = 2000000;  // rank 0 waits for rank 1 to submit: 100 % against 80 %
  l = LinkLine(SummaryLines(job, 1, 1.0));
  EXPECT_NE(l.find("rank 1 holds the others up"), std::string::npos) << l;
}

TEST(JobStatsLinks, NoAllreduceIsSaid) {
  std::vector<JobStats> job = Job(2, 2, 0, 0, 0);
  const std::string l = LinkLine(SummaryLines(job, 1, 1.0));
  EXPECT_NE(l.find("no allreduce ran"), std::string::npos) << l;
}

// The time line ("allreduce bus bandwidth ..."), or "".
std::string TimeLine(const std::vector<std::string>& lines) {
  for (const std::string& l : lines)
    if (l.find("bus bandwidth") != std::string::npos) return l;
  return "";
}

// Eager allreduces move their data in negotiation rounds: neither their bytes nor their local
// reduction time count in the bus bandwidth, though they count as reduced bytes.
TEST(JobStatsEager, EagerBytesStayOutOfTheBusBandwidth) {
  std::vector<JobStats> job = Job(2, 1, 1 << 30, 10, 1000000);
  for (JobStats& s : job) {
    s.bytes_reduced += 1 << 30;  // as much again, eager
    s.bytes_eager = 1 << 30;
    s.allreduce_runs[5] = 1000;
  }
  const std::vector<std::string> lines = SummaryLines(job, 1);
  EXPECT_NE(TimeLine(lines).find("allreduce bus bandwidth 1.07 GB/s"), std::string::npos)
      << TimeLine(lines);
  EXPECT_NE(lines[0].find("(2.0 GiB)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("allreduce ring 10, eager 1000"), std::string::npos) << lines[2];
}

TEST(JobStatsEager, OnlyEagerAllreducesSaySo) {
  std::vector<JobStats> job = Job(2, 1, 4096 * 100, 100, 0);
  for (JobStats& s : job) {
    s.bytes_eager = s.bytes_reduced;
    s.allreduce_runs[2] = 0;
    s.allreduce_runs[5] = 100;
  }
  EXPECT_NE(TimeLine(SummaryLines(job, 1)).find("n/a (every allreduce was eager"),
            std::string::npos)
      << TimeLine(SummaryLines(job, 1));
}

}  // namespace
}  // namespace hvd
