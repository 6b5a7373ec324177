// Per-rank communication counters and the end-of-job summary rank 0 prints from them
// (HOROVOD_SUMMARY), so that a user can tell afterwards whether communication slowed the job.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/message.h"

namespace hvd {

// One rank's counters. Only the background thread writes them, so they need no lock. A plain
// struct: rank 0 gathers every rank's copy as bytes (all ranks run the same build).
struct JobStats {
  static constexpr int kHostBytes = 256;  // MPI_MAX_PROCESSOR_NAME in Open MPI and MPICH

  int64_t start_us = 0, end_us = 0;  // engine start (Init) and end of the background loop
  int64_t collectives = 0;           // responses that ran successfully (errors not counted)
  int64_t tensors = 0;               // tensors in those responses
  int64_t bytes_reduced = 0;         // payload of the allreduces among them
  int64_t bytes_total = 0;           // payload of all of them (this rank's tensors)
  int64_t collective_us = 0;         // in Operations::Execute
  int64_t allreduce_us = 0;          // of which allreduce
  // While this rank had ops submitted and not yet running: waiting for the other ranks to submit
  // them too, and the negotiation rounds that agree on them.
  int64_t negotiation_us = 0;
  char host[kHostBytes] = {};
  // Of bytes_reduced, those of eager allreduces: their data moved in negotiation rounds, so
  // neither they nor their (local) time count in the bus bandwidth.
  int64_t bytes_eager = 0;
  // Responses per algorithm (engine/operations.h: mpi, direct, ring, adasum, hierarchical,
  // eager; allgather: ring, hierarchical), and whether the hierarchical ones were on and why.
  static constexpr int kAllreduceAlgorithms = 6;
  static constexpr int kHierarchical = 4;  // index of the hierarchical allreduce
  int64_t allreduce_runs[kAllreduceAlgorithms] = {};
  int64_t allgather_runs[2] = {};
  char hierarchy[kHostBytes] = {};

  // One executed response: `payload_bytes` is this rank's bytes of all its tensors.
  void RecordCollective(const Response& r, bool ok, int64_t payload_bytes, int64_t us);
  void SetHost(const std::string& name);
  void SetHierarchyNote(const std::string& note);
};
static_assert(std::is_trivially_copyable<JobStats>::value, "gathered as MPI_BYTE");

// The summary lines (without the prefix) rank 0 prints, from every rank's counters (index =
// rank). level 1: the job; level 2: also one line per rank. link_gbps > 0: the slowest link
// between the hosts (HOROVOD_LINK_GBPS), which the job's allreduce bandwidth is compared with;
// link_at_once_gbps > 0: the slowest with all links busy at once (HOROVOD_LINK_AT_ONCE_GBPS).
// `transport` ("mpi", "tcp"; "" to leave it out) follows the hosts in the first line.
std::vector<std::string> SummaryLines(const std::vector<JobStats>& ranks, int level,
                                      double link_gbps = 0, double link_at_once_gbps = 0,
                                      const std::string& transport = "");
// Each line to stderr behind "[horovod summary] ", one flushed write per line.
void PrintSummary(const std::vector<std::string>& lines);

}  // namespace hvd
