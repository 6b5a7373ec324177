// Minimal leveled logging to stderr: "[horovod rank R LEVEL] message".
#pragma once

#include <sstream>
#include <string>

namespace hvd {

enum class LogLevel { TRACE = 0, DEBUG, INFO, WARNING, ERROR };

void SetLogLevel(const std::string& name);
void SetLogRank(int rank);
bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, const std::string& msg);

}  // namespace hvd

#define HVD_LOG(level, expr)                                        \
  do {                                                              \
    if (::hvd::LogEnabled(::hvd::LogLevel::level)) {                \
      std::ostringstream hvd_log_os_;                               \
      hvd_log_os_ << expr;                                          \
      ::hvd::LogMessage(::hvd::LogLevel::level, hvd_log_os_.str()); \
    }                                                               \
  } while (0)
