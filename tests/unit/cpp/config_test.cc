// Config::FromEnvironment (defaults, strict parsing, bounds, the error naming the variable) and
// CheckConfigAcrossRanks (the error every rank raises when ranks disagree).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/config.h"

namespace hvd {
namespace {

// Every test starts from an environment without any HOROVOD_* knob and leaves none behind.
class ConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override { ClearKnobs(); }
  void TearDown() override { ClearKnobs(); }
  static void ClearKnobs() {
    for (const auto& k : Config::Describe()) unsetenv(k.env.c_str());
  }
  static void Set(const char* env, const char* value) { setenv(env, value, 1); }
  // The error for one variable set to `value`, or "" if it parses.
  static std::string ErrorFor(const char* env, const char* value) {
    ClearKnobs();
    Set(env, value);
    std::string error;
    Config::FromEnvironment(&error);
    unsetenv(env);
    return error;
  }
};

TEST_F(ConfigEnv, DefaultsWithoutEnvironment) {
  std::string error = "stale";
  const Config c = Config::FromEnvironment(&error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(c.fusion_threshold, 128LL << 20);
  EXPECT_EQ(c.cycle_time_ms, 1.0);
  EXPECT_EQ(c.cache_capacity, 1024);
  EXPECT_EQ(c.cpu_operations, "ring");
  EXPECT_EQ(c.ring_chunk_bytes, 1LL << 20);
  EXPECT_EQ(c.small_allreduce_bytes, 32LL << 10);
  EXPECT_EQ(c.timeline, "");
  EXPECT_FALSE(c.stall_check_disable);
  EXPECT_EQ(c.stall_check_time_s, 60.0);
  EXPECT_EQ(c.stall_shutdown_time_s, 0.0);
  EXPECT_EQ(c.log_level, "warning");
  EXPECT_FALSE(c.mpi_threads_disable);
  EXPECT_EQ(c.summary_level, 1);
  EXPECT_FALSE(c.timeline_mark_cycles);
  EXPECT_FALSE(c.autotune);
  EXPECT_EQ(c.autotune_log, "");
  EXPECT_EQ(c.autotune_warmup_samples, 3);
  EXPECT_EQ(c.autotune_steps_per_sample, 10);
  EXPECT_EQ(c.autotune_bayes_opt_max_samples, 20);
  EXPECT_TRUE(c.set_in_environment.empty());
}

TEST_F(ConfigEnv, IsSetSaysWhichKnobsTheEnvironmentSet) {
  // Autotune holds a knob set explicitly at its value, even when set to its default.
  Set("HOROVOD_FUSION_THRESHOLD", "134217728");
  std::string error;
  const Config c = Config::FromEnvironment(&error);
  EXPECT_EQ(error, "");
  EXPECT_TRUE(c.IsSet("HOROVOD_FUSION_THRESHOLD"));
  EXPECT_FALSE(c.IsSet("HOROVOD_CYCLE_TIME"));
}

TEST_F(ConfigEnv, ValidValuesAreRead) {
  Set("HOROVOD_FUSION_THRESHOLD", "0");
  Set("HOROVOD_CYCLE_TIME", "0.5");
  Set("HOROVOD_CACHE_CAPACITY", "1048576");
  Set("HOROVOD_CPU_OPERATIONS", "mpi");
  Set("HOROVOD_RING_CHUNK_BYTES", "64");
  Set("HOROVOD_TIMELINE", "/tmp/t.json");
  Set("HOROVOD_STALL_CHECK_DISABLE", "Yes");
  Set("HOROVOD_STALL_CHECK_TIME_SECONDS", "2.5");
  Set("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "2.5");  // equal to the check time: allowed
  Set("HOROVOD_LOG_LEVEL", "DEBUG");
  Set("HOROVOD_MPI_THREADS_DISABLE", "on");
  Set("HOROVOD_SUMMARY", "2");
  std::string error;
  const Config c = Config::FromEnvironment(&error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(c.fusion_threshold, 0);
  EXPECT_EQ(c.cycle_time_ms, 0.5);
  EXPECT_EQ(c.cache_capacity, 1 << 20);
  EXPECT_EQ(c.cpu_operations, "mpi");
  EXPECT_EQ(c.ring_chunk_bytes, 64);
  EXPECT_EQ(c.timeline, "/tmp/t.json");
  EXPECT_TRUE(c.stall_check_disable);
  EXPECT_EQ(c.stall_check_time_s, 2.5);
  EXPECT_EQ(c.stall_shutdown_time_s, 2.5);
  EXPECT_EQ(c.log_level, "debug");  // case-insensitive, stored lower case
  EXPECT_TRUE(c.mpi_threads_disable);
  EXPECT_EQ(c.summary_level, 2);
}

TEST_F(ConfigEnv, BooleansAcceptTheDocumentedSpellings) {
  for (const char* v : {"1", "true", "TRUE", "yes", "on", "On"}) {
    Set("HOROVOD_STALL_CHECK_DISABLE", v);
    std::string error;
    EXPECT_TRUE(Config::FromEnvironment(&error).stall_check_disable) << v;
    EXPECT_EQ(error, "") << v;
  }
  for (const char* v : {"0", "false", "no", "off", "OFF", ""}) {
    Set("HOROVOD_STALL_CHECK_DISABLE", v);
    std::string error;
    EXPECT_FALSE(Config::FromEnvironment(&error).stall_check_disable) << v;
    EXPECT_EQ(error, "") << v;
  }
  EXPECT_EQ(ErrorFor("HOROVOD_STALL_CHECK_DISABLE", "maybe"),
            "HOROVOD_STALL_CHECK_DISABLE='maybe' is not valid: expected one of 1, 0, true, false, "
            "yes, no, on, off");
}

TEST_F(ConfigEnv, MalformedNumbersNameTheVariableAndWhatIsAccepted) {
  EXPECT_EQ(ErrorFor("HOROVOD_CYCLE_TIME", "inf"),
            "HOROVOD_CYCLE_TIME='inf' is not valid: expected a finite number in [0, 1000]");
  EXPECT_EQ(ErrorFor("HOROVOD_CYCLE_TIME", "nan"),
            "HOROVOD_CYCLE_TIME='nan' is not valid: expected a finite number in [0, 1000]");
  EXPECT_EQ(ErrorFor("HOROVOD_CACHE_CAPACITY", "1e8"),
            "HOROVOD_CACHE_CAPACITY='1e8' is not valid: expected an integer in [0, 1048576]");
  // Trailing text, empty, words, overflow: all refused rather than read as a prefix or 0.
  for (const char* v : {"12 ", " 12x", "", "abc", "1.0", "99999999999999999999999"})
    EXPECT_EQ(ErrorFor("HOROVOD_FUSION_THRESHOLD", v),
              std::string("HOROVOD_FUSION_THRESHOLD='") + v +
                  "' is not valid: expected an integer in [0, 68719476736]")
        << "value '" << v << "'";
  EXPECT_NE(ErrorFor("HOROVOD_STALL_CHECK_TIME_SECONDS", "1e999"), "");  // ERANGE
  EXPECT_NE(ErrorFor("HOROVOD_STALL_CHECK_TIME_SECONDS", "5s"), "");
}

TEST_F(ConfigEnv, BoundsAreInclusiveAndEnforced) {
  EXPECT_EQ(ErrorFor("HOROVOD_RING_CHUNK_BYTES", "64"), "");
  EXPECT_EQ(ErrorFor("HOROVOD_RING_CHUNK_BYTES", "1073741824"), "");
  EXPECT_EQ(ErrorFor("HOROVOD_RING_CHUNK_BYTES", "63"),
            "HOROVOD_RING_CHUNK_BYTES='63' is not valid: expected an integer in [64, 1073741824]");
  EXPECT_NE(ErrorFor("HOROVOD_RING_CHUNK_BYTES", "1073741825"), "");
  EXPECT_EQ(ErrorFor("HOROVOD_FUSION_THRESHOLD", "-1"),
            "HOROVOD_FUSION_THRESHOLD='-1' is not valid: expected an integer in [0, 68719476736]");
  EXPECT_NE(ErrorFor("HOROVOD_SMALL_ALLREDUCE_BYTES", "16777217"), "");
  EXPECT_EQ(ErrorFor("HOROVOD_SMALL_ALLREDUCE_BYTES", "16777216"), "");
  EXPECT_EQ(ErrorFor("HOROVOD_SUMMARY", "3"),
            "HOROVOD_SUMMARY='3' is not valid: expected an integer in [0, 2]");
  EXPECT_EQ(ErrorFor("HOROVOD_CYCLE_TIME", "1000"), "");
  EXPECT_EQ(ErrorFor("HOROVOD_CYCLE_TIME", "1000.5"),
            "HOROVOD_CYCLE_TIME='1000.5' is not valid: expected a finite number in [0, 1000]");
  EXPECT_EQ(ErrorFor("HOROVOD_STALL_CHECK_TIME_SECONDS", "0.05"),
            "HOROVOD_STALL_CHECK_TIME_SECONDS='0.05' is not valid: expected a finite number in "
            "[0.1, 1e+06]");
}

TEST_F(ConfigEnv, ChoicesAndCrossKnobRules) {
  EXPECT_EQ(ErrorFor("HOROVOD_CPU_OPERATIONS", "gloo"),
            "HOROVOD_CPU_OPERATIONS='gloo' is not valid: expected ring or mpi");
  EXPECT_EQ(
      ErrorFor("HOROVOD_LOG_LEVEL", "bogus"),
      "HOROVOD_LOG_LEVEL='bogus' is not valid: expected trace, debug, info, warning or error");
  Set("HOROVOD_STALL_CHECK_TIME_SECONDS", "10");
  Set("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "5");
  std::string error;
  Config::FromEnvironment(&error);
  EXPECT_EQ(error,
            "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=5 is below HOROVOD_STALL_CHECK_TIME_SECONDS=10: "
            "set it to 0 (never) or at least the check time");
}

TEST_F(ConfigEnv, FirstErrorInDeclarationOrderWinsAndTheRestStillParse) {
  Set("HOROVOD_CYCLE_TIME", "x");
  Set("HOROVOD_FUSION_THRESHOLD", "y");
  Set("HOROVOD_CACHE_CAPACITY", "7");
  std::string error;
  const Config c = Config::FromEnvironment(&error);
  EXPECT_EQ(error,
            "HOROVOD_FUSION_THRESHOLD='y' is not valid: expected an integer in [0, 68719476736]");
  EXPECT_EQ(c.cache_capacity, 7);
  EXPECT_EQ(c.fusion_threshold, 128LL << 20);  // a bad value leaves the default
}

TEST_F(ConfigEnv, AgreedValuesListOnlyTheKnobsRanksMustShare) {
  Set("HOROVOD_CACHE_CAPACITY", "64");
  Set("HOROVOD_CYCLE_TIME", "3");
  std::string error;
  const std::string agreed = Config::FromEnvironment(&error).AgreedValues();
  EXPECT_NE(agreed.find("HOROVOD_FUSION_THRESHOLD=134217728\n"), std::string::npos) << agreed;
  EXPECT_NE(agreed.find("HOROVOD_CACHE_CAPACITY=64\n"), std::string::npos) << agreed;
  EXPECT_NE(agreed.find("HOROVOD_STALL_CHECK_DISABLE=0\n"), std::string::npos) << agreed;
  EXPECT_EQ(agreed.find("HOROVOD_CYCLE_TIME"), std::string::npos) << agreed;  // LOCAL
  EXPECT_EQ(agreed.find("HOROVOD_LOG_LEVEL"), std::string::npos) << agreed;
  // Parsed, not raw: two spellings of one value agree.
  Set("HOROVOD_CACHE_CAPACITY", "064");
  EXPECT_NE(Config::FromEnvironment(&error).AgreedValues().find("HOROVOD_CACHE_CAPACITY=64\n"),
            std::string::npos);
}

TEST_F(ConfigEnv, DescribeListsEveryKnobWithRangeAndScope) {
  const auto knobs = Config::Describe();
  ASSERT_EQ(knobs.size(), 31u);
  EXPECT_EQ(knobs[0].env, "HOROVOD_FUSION_THRESHOLD");
  EXPECT_EQ(knobs[0].default_value, "134217728");
  EXPECT_EQ(knobs[0].type, "int");
  EXPECT_EQ(knobs[0].min, 0);
  EXPECT_EQ(knobs[0].max, 68719476736.0);
  EXPECT_TRUE(knobs[0].agree);
  for (const auto& k : knobs) {
    EXPECT_EQ(k.env.rfind("HOROVOD_", 0), 0u) << k.env;
    EXPECT_FALSE(k.doc.empty()) << k.env;
    if (k.env == "HOROVOD_CYCLE_TIME") {
      EXPECT_FALSE(k.agree);  // LOCAL
    }
    if (k.env == "HOROVOD_LOG_LEVEL") { EXPECT_EQ(k.choices.size(), 5u); }
    if (k.env == "HOROVOD_JOIN_AVERAGE") {  // upstream's semantics by default (issue 54)
      EXPECT_EQ(k.default_value, "set");
      EXPECT_EQ(k.choices, (std::vector<std::string>{"set", "contributors"}));
      EXPECT_TRUE(k.agree);
    }
    if (k.env == "HOROVOD_HIERARCHICAL_ALLREDUCE") {
      EXPECT_EQ(k.default_value, "auto");
      EXPECT_EQ(k.choices, (std::vector<std::string>{"auto", "1", "0"}));
      EXPECT_TRUE(k.agree);
    }
  }
}

TEST(CheckConfigAcrossRanks, ConsistentIsEmpty) {
  Config c;
  const std::string v = c.AgreedValues();
  EXPECT_EQ(CheckConfigAcrossRanks({"", "", ""}, {v, v, v}), "");
  EXPECT_EQ(CheckConfigAcrossRanks({}, {}), "");
}

TEST(CheckConfigAcrossRanks, ParseErrorsAreGroupedByMessageAndComeFirst) {
  const std::string bad =
      "HOROVOD_CYCLE_TIME='inf' is not valid: expected a finite number in [0, 1000]";
  Config c, other;
  other.cache_capacity = 64;
  EXPECT_EQ(CheckConfigAcrossRanks({bad, "", bad},
                                   {c.AgreedValues(), other.AgreedValues(), c.AgreedValues()}),
            "Horovod configuration error: ranks [0, 2]: " + bad);
  EXPECT_EQ(CheckConfigAcrossRanks({"", bad}, {c.AgreedValues(), c.AgreedValues()}),
            "Horovod configuration error: rank 1: " + bad);
}

TEST(CheckConfigAcrossRanks, DisagreementNamesEachKnobAndEachRanksValue) {
  Config c, small, mpi;
  small.cache_capacity = 64;
  mpi.cache_capacity = 64;
  mpi.cpu_operations = "mpi";
  EXPECT_EQ(
      CheckConfigAcrossRanks({"", "", ""},
                             {c.AgreedValues(), small.AgreedValues(), c.AgreedValues()}),
      "Horovod configuration error: these knobs must be equal on every rank (set them the same "
      "way for every process, e.g. mpirun -x VAR=value or every worker's environment): "
      "HOROVOD_CACHE_CAPACITY differs: ranks "
      "[0, 2] have '1024', rank 1 has '64'");
  const std::string two = CheckConfigAcrossRanks({"", ""}, {c.AgreedValues(), mpi.AgreedValues()});
  // Knobs in declaration order, each once.
  const auto cache = two.find("HOROVOD_CACHE_CAPACITY differs: rank 0 has '1024', rank 1 has '64'");
  const auto ops =
      two.find("; HOROVOD_CPU_OPERATIONS differs: rank 1 has 'mpi', rank 0 has 'ring'");
  EXPECT_NE(cache, std::string::npos) << two;
  EXPECT_NE(ops, std::string::npos) << two;
  EXPECT_LT(cache, ops);
}

}  // namespace
}  // namespace hvd
