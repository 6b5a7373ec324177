#include "common/logging.h"

#include <atomic>
#include <cstdio>

namespace hvd {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::WARNING)};
std::atomic<int> g_rank{-1};
const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR"};
}  // namespace

void SetLogLevel(const std::string& name) {
  for (int i = 0; i < 5; ++i) {
    std::string lower = kNames[i];
    for (auto& c : lower) c = static_cast<char>(std::tolower(c));
    if (name == lower || name == kNames[i]) g_level = i;
  }
}

void SetLogRank(int rank) { g_rank = rank; }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void LogMessage(LogLevel level, const std::string& msg) {
  // One fprintf per line so lines of concurrent ranks do not interleave mid-line.
  // Before init this process has no rank yet: say nothing rather than "rank -1".
  const int rank = g_rank.load();
  if (rank < 0)
    std::fprintf(stderr, "[horovod %s] %s\n", kNames[static_cast<int>(level)], msg.c_str());
  else
    std::fprintf(stderr, "[horovod rank %d %s] %s\n", rank, kNames[static_cast<int>(level)],
                 msg.c_str());
  std::fflush(stderr);
}

}  // namespace hvd
