#include "common/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "common/common.h"

namespace hvd {
namespace {

// Strict parsers: the whole string must be the value (no trailing text, no "1e8" for an
// integer, no inf/nan), and numbers must lie in [lo, hi]. `expected` says what is accepted.
bool Parse(const char* s, int64_t* out, double lo, double hi, std::string* expected) {
  std::ostringstream os;
  os << "an integer in [" << static_cast<int64_t>(lo) << ", " << static_cast<int64_t>(hi) << "]";
  *expected = os.str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE) return false;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}
bool Parse(const char* s, double* out, double lo, double hi, std::string* expected) {
  std::ostringstream os;
  os << "a finite number in [" << lo << ", " << hi << "]";
  *expected = os.str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return false;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}
bool Parse(const char* s, bool* out, double, double, std::string* expected) {
  *expected = "one of 1, 0, true, false, yes, no, on, off";
  std::string v(s);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1" || v == "true" || v == "yes" || v == "on") { *out = true; return true; }
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) { *out = false; return true; }
  return false;
}
bool Parse(const char* s, std::string* out, double, double, std::string*) {
  *out = s;
  return true;
}

template <typename T>
std::string ToString(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
std::string ToString(bool v) { return v ? "1" : "0"; }

template <typename T>
std::string Range(double lo, double hi) {
  if constexpr (std::is_same_v<T, int64_t>) return "[" + ToString(static_cast<int64_t>(lo)) + ", " + ToString(static_cast<int64_t>(hi)) + "]";
  if constexpr (std::is_same_v<T, double>) return "[" + ToString(lo) + ", " + ToString(hi) + "]";
  return "";
}

bool OneOf(const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (v == a) return true;
  return false;
}

}  // namespace

Config Config::FromEnvironment(std::string* error) {
  Config c;
  error->clear();
  auto fail = [&](const std::string& msg) {
    if (error->empty()) *error = msg;
  };
#define HVD_READ_FIELD(field, env, type, def, lo, hi, scope, doc)                         \
  if (const char* v = std::getenv(env)) {                                                 \
    std::string expected;                                                                 \
    if (!Parse(v, &c.field, lo, hi, &expected))                                           \
      fail(std::string(env) + "='" + v + "' is not valid: expected " + expected);         \
  }
  HVD_CONFIG_KNOBS(HVD_READ_FIELD)
#undef HVD_READ_FIELD
  if (!OneOf(c.cpu_operations, {"ring", "mpi"}))
    fail("HOROVOD_CPU_OPERATIONS='" + c.cpu_operations + "' is not valid: expected 'ring' or 'mpi'");
  for (auto& ch : c.log_level) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!OneOf(c.log_level, {"trace", "debug", "info", "warning", "error"}))
    fail("HOROVOD_LOG_LEVEL='" + c.log_level +
         "' is not valid: expected trace, debug, info, warning or error");
  // A stall is first seen at the check time, so an earlier shutdown could never happen as set.
  if (c.stall_shutdown_time_s > 0 && c.stall_shutdown_time_s < c.stall_check_time_s)
    fail("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" + ToString(c.stall_shutdown_time_s) +
         " is below HOROVOD_STALL_CHECK_TIME_SECONDS=" + ToString(c.stall_check_time_s) +
         ": set it to 0 (never) or at least the check time");
  return c;
}

std::string Config::AgreedValues() const {
  std::ostringstream os;
#define HVD_AGREED_FIELD(field, env, type, def, lo, hi, scope, doc) \
  if (Scope::scope == Scope::AGREE) os << env << "=" << ToString(field) << "\n";
  HVD_CONFIG_KNOBS(HVD_AGREED_FIELD)
#undef HVD_AGREED_FIELD
  return os.str();
}

std::vector<Config::Knob> Config::Describe() {
  std::vector<Knob> out;
  Config defaults;
#define HVD_DESCRIBE_FIELD(field, env, type, def, lo, hi, scope, doc)                        \
  out.push_back({env, ToString(defaults.field),                                              \
                 std::string(doc) + (Range<type>(lo, hi).empty() ? "" : "; range " + Range<type>(lo, hi)) + \
                     (Scope::scope == Scope::AGREE ? "; must be equal on every rank" : "")});
  HVD_CONFIG_KNOBS(HVD_DESCRIBE_FIELD)
#undef HVD_DESCRIBE_FIELD
  return out;
}

std::string CheckConfigAcrossRanks(const std::vector<std::string>& errors,
                                   const std::vector<std::string>& agreed) {
  // Both checks group ranks by value so a 64-rank job prints one line per distinct value.
  auto grouped = [](const std::vector<std::pair<std::string, int>>& values) {
    std::map<std::string, std::vector<int>> by_value;
    for (const auto& [v, r] : values) by_value[v].push_back(r);
    return by_value;
  };
  std::ostringstream os;
  std::vector<std::pair<std::string, int>> bad;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) bad.push_back({errors[r], static_cast<int>(r)});
  for (const auto& [msg, ranks] : grouped(bad))
    os << (os.tellp() ? "; " : "") << Ranks(ranks) << ": " << msg;
  if (!bad.empty()) return "Horovod configuration error: " + os.str();

  // knob -> [(value, rank)]
  std::map<std::string, std::vector<std::pair<std::string, int>>> knobs;
  std::vector<std::string> order;
  for (size_t r = 0; r < agreed.size(); ++r) {
    std::istringstream in(agreed[r]);
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      std::string env = line.substr(0, eq), value = line.substr(eq + 1);
      if (!knobs.count(env)) order.push_back(env);
      knobs[env].push_back({value, static_cast<int>(r)});
    }
  }
  for (const auto& env : order) {
    auto by_value = grouped(knobs[env]);
    if (by_value.size() < 2) continue;
    os << (os.tellp() ? "; " : "") << env << " differs: ";
    bool first = true;
    for (const auto& [v, ranks] : by_value) {
      os << (first ? "" : ", ") << Ranks(ranks) << " " << (ranks.size() > 1 ? "have" : "has")
         << " '" << v << "'";
      first = false;
    }
  }
  if (os.tellp() == 0) return "";
  return "Horovod configuration error: these knobs must be equal on every rank (set them the "
         "same way for every process, e.g. mpirun -x VAR=value): " + os.str();
}

}  // namespace hvd
