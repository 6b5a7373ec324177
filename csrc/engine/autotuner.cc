#include "engine/autotuner.h"

#include <algorithm>
#include <sstream>

#include "common/logging.h"

namespace hvd {
namespace {

constexpr double kMiB = 1 << 20;

// `value` in `grid` (inserted in order if missing): the starting setting is always a candidate.
template <typename T>
std::vector<T> GridWith(std::vector<T> grid, T value, bool fixed) {
  if (fixed) return {value};
  if (std::find(grid.begin(), grid.end(), value) == grid.end()) {
    grid.push_back(value);
    std::sort(grid.begin(), grid.end());
  }
  return grid;
}

template <typename T>
int IndexOf(const std::vector<T>& grid, T value) {
  return static_cast<int>(std::find(grid.begin(), grid.end(), value) - grid.begin());
}

}  // namespace

std::string DescribeParams(const TunedParams& p) {
  std::ostringstream os;
  os << "fusion threshold " << p.fusion_threshold / kMiB << " MiB, cycle time " << p.cycle_time_ms
     << " ms";
  return os.str();
}

const std::vector<int64_t>& Autotuner::FusionGrid() {
  static const std::vector<int64_t> grid = {0,        1 << 20,  4 << 20,  16 << 20,
                                            32 << 20, 64 << 20, 128 << 20};
  return grid;
}

const std::vector<double>& Autotuner::CycleGrid() {
  static const std::vector<double> grid = {0.5, 1, 2.5, 5, 10};
  return grid;
}

Autotuner::Autotuner(const Config& config, bool fusion_fixed, bool cycle_fixed)
    : fusion_(GridWith(FusionGrid(), config.fusion_threshold, fusion_fixed)),
      cycle_(GridWith(CycleGrid(), config.cycle_time_ms, cycle_fixed)),
      warmup_left_(config.autotune_warmup_samples),
      steps_per_sample_(config.autotune_steps_per_sample),
      max_samples_(config.autotune_bayes_opt_max_samples),
      current_(IndexOf(fusion_, config.fusion_threshold), IndexOf(cycle_, config.cycle_time_ms)) {
  if (warmup_left_ == 0) phase_ = Phase::MEASURE;
  if (fusion_.size() == 1 && cycle_.size() == 1) phase_ = Phase::DONE;  // nothing to tune
  if (!config.autotune_log.empty()) {
    log_ = std::fopen(config.autotune_log.c_str(), "w");
    if (!log_)
      HVD_LOG(WARNING, "autotune: cannot open HOROVOD_AUTOTUNE_LOG='"
                           << config.autotune_log << "' for writing; tuning without a log");
    else
      std::fputs(
          "sample,fusion_threshold_mib,cycle_time_ms,rounds,bytes,seconds,score_bytes_per_s\n",
          log_);
  }
}

Autotuner::~Autotuner() {
  if (log_) std::fclose(log_);
}

TunedParams Autotuner::ParamsAt(Point p, bool final) const {
  return {fusion_[p.first], cycle_[p.second], final};
}

Autotuner::Point Autotuner::BestPoint() const {
  Point best = current_;
  double best_score = -1;
  for (const Point& p : order_)  // ties: the first measured
    if (scores_.at(p) > best_score) {
      best_score = scores_.at(p);
      best = p;
    }
  return best;
}

TunedParams Autotuner::best() const { return ParamsAt(BestPoint(), phase_ == Phase::DONE); }

bool Autotuner::NextPoint(Point* next) {
  const Point best = BestPoint();
  for (int k = 0; k < 2; ++k) {
    const int axis = (axis_ + k) % 2;
    const int n = static_cast<int>(axis == 0 ? fusion_.size() : cycle_.size());
    for (int i = 0; i < n; ++i) {
      const Point p = axis == 0 ? Point{i, best.second} : Point{best.first, i};
      if (!scores_.count(p)) {
        axis_ = axis;
        *next = p;
        return true;
      }
    }
  }
  return false;
}

void Autotuner::RecordRound(int64_t bytes, int64_t now_us) {
  if (phase_ != Phase::WARMUP && phase_ != Phase::MEASURE) return;
  if (start_us_ < 0) {  // the job's first round: the first sample starts when it ends
    start_us_ = now_us;
    return;
  }
  bytes_ += bytes;
  if (++rounds_ >= steps_per_sample_) EndSample(now_us);
}

void Autotuner::WriteRow(const std::string& label, Point p, double score) {
  if (!log_) return;
  std::ostringstream row;
  const TunedParams t = ParamsAt(p, false);
  row << label << "," << t.fusion_threshold / kMiB << "," << t.cycle_time_ms << ",";
  if (label == "chosen")
    row << ",,";
  else
    row << rounds_ << "," << bytes_ << "," << sample_seconds_;
  row << "," << static_cast<int64_t>(score) << "\n";
  std::fputs(row.str().c_str(), log_);
  std::fflush(log_);
}

void Autotuner::EndSample(int64_t now_us) {
  sample_seconds_ = std::max<int64_t>(now_us - start_us_, 1) * 1e-6;
  const double score = bytes_ / sample_seconds_;
  if (phase_ == Phase::WARMUP) {
    WriteRow("warmup", current_, score);
    if (--warmup_left_ == 0) phase_ = Phase::MEASURE;
  } else {
    scores_[current_] = score;
    order_.push_back(current_);
    WriteRow(std::to_string(order_.size()), current_, score);
    HVD_LOG(INFO, "autotune: sample " << order_.size() << ": "
                                      << DescribeParams(ParamsAt(current_, false)) << ": "
                                      << score / 1e6 << " MB/s");
    Point next;
    const bool more = static_cast<int64_t>(order_.size()) < max_samples_ && NextPoint(&next);
    proposal_ = more ? ParamsAt(next, false) : ParamsAt(BestPoint(), true);
    if (more) current_ = next;
    has_proposal_ = true;
    phase_ = Phase::WAIT_APPLY;
  }
  start_us_ = now_us;
  rounds_ = bytes_ = 0;
}

bool Autotuner::TakeProposal(TunedParams* out) {
  if (!has_proposal_) return false;
  has_proposal_ = false;
  *out = proposal_;
  return true;
}

void Autotuner::Applied(const TunedParams& p, int64_t now_us) {
  if (phase_ != Phase::WAIT_APPLY) return;
  start_us_ = now_us;
  rounds_ = bytes_ = 0;
  if (!p.final) {
    phase_ = Phase::MEASURE;
    return;
  }
  phase_ = Phase::DONE;
  const Point best = BestPoint();
  WriteRow("chosen", best, scores_.at(best));
  // At the default log level (warning) too: what the job runs with from now on.
  if (LogEnabled(LogLevel::WARNING))
    LogMessage(LogLevel::INFO, "autotune: chose " + DescribeParams(p) + " after " +
                                   std::to_string(order_.size()) + " samples");
}

}  // namespace hvd
