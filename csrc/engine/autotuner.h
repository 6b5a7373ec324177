// HOROVOD_AUTOTUNE: rank 0 tunes the fusion threshold and the cycle time while the job runs.
//
// A sample is HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE negotiation rounds that ran ops under one
// setting; its score is the payload bytes of those ops per second of wall time, from the moment
// the setting took effect to the end of its last round (so idle time between steps counts: a
// long cycle time that delays every step scores lower). The first WARMUP_SAMPLES samples, under
// the starting setting, are discarded (first-step allocations, graph tracing).
//
// The search is a deterministic coordinate search over two grids: every fusion threshold at the
// starting cycle time, then every cycle time at the best threshold, then the other axis again
// through the best point, until a sweep finds nothing unmeasured or BAYES_OPT_MAX_SAMPLES
// settings were scored. A knob the user set explicitly is held at its value (as upstream).
// Then the best setting is sent once more, marked final, and stays.
//
// Only rank 0 has an Autotuner. Its settings reach the others through the controller: rank 0
// hands a proposal to the next round (Controller::RunRound), which forces that round onto the
// slow path and carries it in the response list, and every rank applies it after that round
// (ResponseList::params), so all ranks switch between the same two rounds.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/message.h"

namespace hvd {

// "fusion threshold 4 MiB, cycle time 2.5 ms", for logs.
std::string DescribeParams(const TunedParams& p);

class Autotuner {
 public:
  // fusion_fixed / cycle_fixed: that knob was set explicitly, so it is not tuned.
  Autotuner(const Config& config, bool fusion_fixed, bool cycle_fixed);
  ~Autotuner();
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;

  // Tuning is not over yet (the final setting has not taken effect).
  bool tuning() const { return phase_ != Phase::DONE; }
  // A round that ran ops ended at now_us, having moved `bytes` of payload.
  void RecordRound(int64_t bytes, int64_t now_us);
  // The setting to send with the next round, once per setting; false if none is due.
  bool TakeProposal(TunedParams* out);
  // The round that carried `p` ended at now_us: `p` is in effect on every rank from now on.
  void Applied(const TunedParams& p, int64_t now_us);

  // The grids searched when a knob is not fixed.
  static const std::vector<int64_t>& FusionGrid();  // bytes
  static const std::vector<double>& CycleGrid();    // ms
  int scored_samples() const { return static_cast<int>(scores_.size()); }
  TunedParams best() const;

 private:
  enum class Phase { WARMUP, MEASURE, WAIT_APPLY, DONE };
  using Point = std::pair<int, int>;  // indexes into fusion_, cycle_

  TunedParams ParamsAt(Point p, bool final) const;
  Point BestPoint() const;
  // The next unmeasured point on a line through the best one, or false: tuning is over.
  bool NextPoint(Point* next);
  void EndSample(int64_t now_us);
  // One CSV row: `label` is the sample's number, "warmup", or "chosen" (the last row).
  void WriteRow(const std::string& label, Point p, double score);

  std::vector<int64_t> fusion_;
  std::vector<double> cycle_;
  int64_t warmup_left_, steps_per_sample_, max_samples_;
  Phase phase_ = Phase::WARMUP;
  Point current_;
  int axis_ = 0;  // 0: sweeping fusion thresholds, 1: cycle times
  std::map<Point, double> scores_;
  std::vector<Point> order_;  // scored points, in the order they were measured
  bool has_proposal_ = false;
  TunedParams proposal_;
  // The current sample: since when, how many rounds, how many bytes. start_us_ < 0: the first
  // sample starts at its first round.
  int64_t start_us_ = -1, rounds_ = 0, bytes_ = 0;
  double sample_seconds_ = 0;  // of the sample just ended
  std::FILE* log_ = nullptr;
};

}  // namespace hvd
