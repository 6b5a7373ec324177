#include "common/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <type_traits>

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
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    *out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) {
    *out = false;
    return true;
  }
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

// String knobs that accept a fixed set of values, and whether case is ignored.
struct Choices {
  const char* env;
  std::vector<std::string> values;
  bool ignore_case;
};
const std::vector<Choices>& ChoiceTable() {
  static const std::vector<Choices> table = {
      {"HOROVOD_CPU_OPERATIONS", {"ring", "mpi"}, false},
      {"HOROVOD_TRANSPORT", {"auto", "mpi", "tcp"}, false},
      {"HOROVOD_JOIN_AVERAGE", {"set", "contributors"}, false},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", {"auto", "1", "0"}, true},
      {"HOROVOD_HIERARCHICAL_ALLGATHER", {"auto", "1", "0"}, true},
      {"HOROVOD_LOG_LEVEL", {"trace", "debug", "info", "warning", "error"}, true},
  };
  return table;
}
const Choices* ChoicesOf(const std::string& env) {
  for (const auto& c : ChoiceTable())
    if (env == c.env) return &c;
  return nullptr;
}

template <typename T>
const char* TypeName() {
  if constexpr (std::is_same_v<T, int64_t>) return "int";
  if constexpr (std::is_same_v<T, double>) return "float";
  if constexpr (std::is_same_v<T, bool>) return "bool";
  return "string";
}

// One knob's value into *field, with its parser, bounds and allowed values: "" or the error
// naming the variable. FromEnvironment and Check both parse through here, so they cannot differ.
template <typename T>
std::string ParseKnob(const char* env, const std::string& value, T* field, double lo, double hi) {
  std::string expected;
  if (!Parse(value.c_str(), field, lo, hi, &expected))
    return std::string(env) + "='" + value + "' is not valid: expected " + expected;
  if constexpr (std::is_same_v<T, std::string>) {
    if (const Choices* c = ChoicesOf(env)) {
      if (c->ignore_case)
        for (auto& ch : *field)
          ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      for (const auto& v : c->values)
        if (*field == v) return "";
      std::string list;
      for (size_t i = 0; i < c->values.size(); ++i)
        list += (i == 0 ? "" : i + 1 == c->values.size() ? " or " : ", ") + c->values[i];
      return std::string(env) + "='" + value + "' is not valid: expected " + list;
    }
  }
  return "";
}

}  // namespace

Config Config::FromEnvironment(std::string* error) {
  Config c;
  error->clear();
  auto fail = [&](const std::string& msg) {
    if (error->empty()) *error = msg;
  };
#define HVD_READ_FIELD(field, env, type, def, lo, hi, scope, doc) \
  if (const char* v = std::getenv(env)) {                         \
    fail(ParseKnob(env, v, &c.field, lo, hi));                    \
    c.set_in_environment.push_back(env);                          \
  }
  HVD_CONFIG_KNOBS(HVD_READ_FIELD)
#undef HVD_READ_FIELD
  // A stall is first seen at the check time, so an earlier shutdown could never happen as set.
  if (c.stall_shutdown_time_s > 0 && c.stall_shutdown_time_s < c.stall_check_time_s)
    fail("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" + ToString(c.stall_shutdown_time_s) +
         " is below HOROVOD_STALL_CHECK_TIME_SECONDS=" + ToString(c.stall_check_time_s) +
         ": set it to 0 (never) or at least the check time");
  return c;
}

bool Config::IsSet(const std::string& env) const {
  return std::find(set_in_environment.begin(), set_in_environment.end(), env) !=
         set_in_environment.end();
}

std::string Config::AgreedValues() const {
  std::ostringstream os;
#define HVD_AGREED_FIELD(field, env, type, def, lo, hi, scope, doc) \
  if (Scope::scope == Scope::AGREE) os << env << "=" << ToString(field) << "\n";
  HVD_CONFIG_KNOBS(HVD_AGREED_FIELD)
#undef HVD_AGREED_FIELD
  return os.str();
}

std::string Config::Check(const std::string& env, const std::string& value) {
  // The environment cannot hold a NUL; c_str() would silently check only what precedes it.
  if (value.find('\0') != std::string::npos)
    return env + " is not valid: the value contains a NUL character";
  Config c;
#define HVD_CHECK_FIELD(field, name, type, def, lo, hi, scope, doc) \
  if (env == name) return ParseKnob(name, value, &c.field, lo, hi);
  HVD_CONFIG_KNOBS(HVD_CHECK_FIELD)
#undef HVD_CHECK_FIELD
  return env + " is not a Horovod knob";
}

std::vector<Config::Knob> Config::Describe() {
  std::vector<Knob> out;
  Config defaults;
#define HVD_DESCRIBE_FIELD(field, env, type, def, lo, hi, scope, doc)       \
  {                                                                         \
    Knob k{env, ToString(defaults.field),    doc, TypeName<type>(), lo, hi, \
           {},  Scope::scope == Scope::AGREE};                              \
    if (const Choices* c = ChoicesOf(env)) k.choices = c->values;           \
    out.push_back(k);                                                       \
  }
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
         "same way for every process, e.g. mpirun -x VAR=value or every worker's environment): " +
         os.str();
}

}  // namespace hvd
