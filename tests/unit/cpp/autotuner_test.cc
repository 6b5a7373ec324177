// The autotuner's search (HOROVOD_AUTOTUNE) against a made-up job whose throughput is a known
// function of the setting: which settings it tries and in what order, that it keeps the best,
// holds a knob set explicitly, stops at the sample limit, discards warmup samples, and writes
// one CSV row per sample. Time is passed in, so nothing here sleeps or measures.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/autotuner.h"

namespace hvd {
namespace {

constexpr int64_t kMiB = 1 << 20;
using Setting = std::pair<int64_t, double>;  // fusion bytes, cycle ms

Config TuningConfig(int64_t warmup, int64_t steps, int64_t max_samples) {
  Config c;
  c.autotune = true;
  c.autotune_warmup_samples = warmup;
  c.autotune_steps_per_sample = steps;
  c.autotune_bayes_opt_max_samples = max_samples;
  return c;
}

struct Outcome {
  std::vector<Setting> applied;  // every setting sent, in order
  TunedParams final;
  bool finished = false;
  int64_t rounds = 0;
};

// Drives the tuner as the engine loop does: each round first sends a due proposal (the round
// that carries it is not measured), else runs ops taking `micros(setting)` for 1 MB.
Outcome Drive(Autotuner* t, Setting start, const std::function<int64_t(Setting)>& micros) {
  Outcome run;
  Setting now_setting = start;
  int64_t now = 0;
  for (; run.rounds < 10000 && t->tuning(); ++run.rounds) {
    TunedParams p;
    if (t->TakeProposal(&p)) {
      now += 10;
      now_setting = {p.fusion_threshold, p.cycle_time_ms};
      run.applied.push_back(now_setting);
      t->Applied(p, now);
      if (p.final) {
        run.final = p;
        run.finished = true;
      }
      continue;
    }
    now += micros(now_setting);
    t->RecordRound(1000000, now);
  }
  return run;
}

// Fastest at 16 MiB and 2.5 ms; each axis on its own is unimodal.
int64_t Peaked(Setting s) {
  const double f = static_cast<double>(s.first) / kMiB;
  return 1000 +
         static_cast<int64_t>(10 * (f - 16) * (f - 16) + 100 * (s.second - 2.5) * (s.second - 2.5));
}

TEST(Autotuner, SweepsFusionThenCycleAndKeepsTheBest) {
  Autotuner t(TuningConfig(1, 3, 20), false, false);
  const Outcome run = Drive(&t, {128 * kMiB, 1.0}, Peaked);
  ASSERT_TRUE(run.finished);
  EXPECT_EQ(run.final.fusion_threshold, 16 * kMiB);
  EXPECT_EQ(run.final.cycle_time_ms, 2.5);
  // After the starting point, the other six thresholds at 1 ms, the other four cycle times at
  // the best threshold (16 MiB), then the thresholds again at the best cycle time (2.5 ms);
  // both lines through the best point are then measured, so it stops after 17 samples.
  const std::vector<Setting> expected = {
      {0, 1.0},          {1 * kMiB, 1.0},  {4 * kMiB, 1.0},  {16 * kMiB, 1.0}, {32 * kMiB, 1.0},
      {64 * kMiB, 1.0},  {16 * kMiB, 0.5}, {16 * kMiB, 2.5}, {16 * kMiB, 5.0}, {16 * kMiB, 10.0},
      {0, 2.5},          {1 * kMiB, 2.5},  {4 * kMiB, 2.5},  {32 * kMiB, 2.5}, {64 * kMiB, 2.5},
      {128 * kMiB, 2.5}, {16 * kMiB, 2.5}};  // the last: the final one
  EXPECT_EQ(run.applied, expected);
  EXPECT_EQ(t.scored_samples(), 17);
  EXPECT_FALSE(t.tuning());
  TunedParams p;
  EXPECT_FALSE(t.TakeProposal(&p)) << "nothing more is sent once tuning is over";
}

TEST(Autotuner, SweepsTheFusionAxisAgainWhenTheBestCycleTimeMoves) {
  // At 1 ms the best threshold is 4 MiB; at 4 MiB the best cycle time is 10 ms, where the best
  // threshold is 16 MiB: only a second fusion sweep finds it.
  auto micros = [](Setting s) -> int64_t {
    const double f = static_cast<double>(s.first) / kMiB;
    const double best_f = s.second >= 10 ? 16 : 4;
    return 1000 + static_cast<int64_t>(0.5 * (f - best_f) * (f - best_f) + 50 * (10 - s.second));
  };
  Autotuner t(TuningConfig(0, 2, 20), false, false);
  const Outcome run = Drive(&t, {128 * kMiB, 1.0}, micros);
  ASSERT_TRUE(run.finished);
  EXPECT_EQ(run.final.fusion_threshold, 16 * kMiB);
  EXPECT_EQ(run.final.cycle_time_ms, 10.0);
}

TEST(Autotuner, StopsAtTheSampleLimitWithTheBestSoFar) {
  Autotuner t(TuningConfig(0, 1, 4), false, false);
  const Outcome run = Drive(&t, {128 * kMiB, 1.0}, Peaked);
  ASSERT_TRUE(run.finished);
  EXPECT_EQ(t.scored_samples(), 4);
  // 128, 0, 1, 4 MiB measured: 4 MiB is closest to the peak.
  EXPECT_EQ(run.final.fusion_threshold, 4 * kMiB);
  EXPECT_EQ(run.final.cycle_time_ms, 1.0);
}

TEST(Autotuner, HoldsAKnobSetExplicitly) {
  Config c = TuningConfig(0, 2, 20);
  c.fusion_threshold = 3 * kMiB;  // not on the grid: held as it is
  Autotuner t(c, /*fusion_fixed=*/true, /*cycle_fixed=*/false);
  const Outcome run = Drive(&t, {3 * kMiB, 1.0}, Peaked);
  ASSERT_TRUE(run.finished);
  std::set<int64_t> fusions;
  for (const auto& s : run.applied) fusions.insert(s.first);
  EXPECT_EQ(fusions, std::set<int64_t>{3 * kMiB});
  EXPECT_EQ(t.scored_samples(), 5);  // the five cycle times
  EXPECT_EQ(run.final.cycle_time_ms, 2.5);
}

TEST(Autotuner, BothKnobsFixedLeavesNothingToTune) {
  Autotuner t(TuningConfig(3, 10, 20), true, true);
  EXPECT_FALSE(t.tuning());
  TunedParams p;
  EXPECT_FALSE(t.TakeProposal(&p));
}

TEST(Autotuner, WarmupSamplesAreNotScoredAndRoundsBeforeASwitchAreNotCounted) {
  Autotuner t(TuningConfig(2, 5, 20), false, false);
  int64_t now = 0;
  // The first round starts the clock; then two warmup samples of 5 rounds propose nothing.
  t.RecordRound(1, now += 100);
  for (int i = 0; i < 10; ++i) t.RecordRound(1000, now += 100);
  TunedParams p;
  EXPECT_FALSE(t.TakeProposal(&p));
  EXPECT_EQ(t.scored_samples(), 0);
  for (int i = 0; i < 5; ++i) t.RecordRound(1000, now += 100);
  EXPECT_EQ(t.scored_samples(), 1);
  ASSERT_TRUE(t.TakeProposal(&p));
  EXPECT_FALSE(p.final);
  // Rounds between the proposal and the round that applies it ran the old setting: ignored.
  for (int i = 0; i < 20; ++i) t.RecordRound(1000, now += 100);
  EXPECT_EQ(t.scored_samples(), 1);
  t.Applied(p, now += 10);
  for (int i = 0; i < 5; ++i) t.RecordRound(1000, now += 100);
  EXPECT_EQ(t.scored_samples(), 2);
}

TEST(Autotuner, LogsOneRowPerSampleAndTheChoiceLast) {
  const std::string path = ::testing::TempDir() + "/autotune_test.csv";
  Config c = TuningConfig(1, 2, 3);
  c.autotune_log = path;
  {
    Autotuner t(c, false, false);
    const Outcome run = Drive(&t, {128 * kMiB, 1.0}, Peaked);
    ASSERT_TRUE(run.finished);
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u + 1 + 3 + 1);
  EXPECT_EQ(lines[0],
            "sample,fusion_threshold_mib,cycle_time_ms,rounds,bytes,seconds,score_bytes_per_s");
  EXPECT_EQ(lines[1].rfind("warmup,128,1,2,2000000,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("1,128,1,2,2000000,", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("2,0,1,", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("3,1,1,", 0), 0u) << lines[4];
  EXPECT_EQ(lines[5].rfind("chosen,1,1,,,,", 0), 0u) << lines[5];
  std::remove(path.c_str());
}

}  // namespace
}  // namespace hvd
