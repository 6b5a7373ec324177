#include "common/config.h"

#include <cstdlib>
#include <sstream>

namespace hvd {
namespace {

bool Parse(const char* s, int64_t* out) {
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0') return false;
  *out = v;
  return true;
}
bool Parse(const char* s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0') return false;
  *out = v;
  return true;
}
bool Parse(const char* s, bool* out) {
  std::string v(s);
  for (auto& c : v) c = static_cast<char>(std::tolower(c));
  if (v == "1" || v == "true" || v == "yes" || v == "on") { *out = true; return true; }
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) { *out = false; return true; }
  return false;
}
bool Parse(const char* s, std::string* out) {
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

}  // namespace

Config Config::FromEnvironment(std::string* error) {
  Config c;
  error->clear();
#define HVD_READ_FIELD(field, env, type, def, doc)                                  \
  if (const char* v = std::getenv(env)) {                                           \
    if (!Parse(v, &c.field) && error->empty())                                      \
      *error = std::string("cannot parse ") + env + "='" + v + "' as " #type;       \
  }
  HVD_CONFIG_KNOBS(HVD_READ_FIELD)
#undef HVD_READ_FIELD
  if (error->empty() && c.cpu_operations != "ring" && c.cpu_operations != "mpi")
    *error = "HOROVOD_CPU_OPERATIONS must be 'ring' or 'mpi', got '" + c.cpu_operations + "'";
  if (error->empty() && c.ring_chunk_bytes < 64)
    *error = "HOROVOD_RING_CHUNK_BYTES must be at least 64";
  if (c.fusion_threshold < 0) c.fusion_threshold = 0;
  if (c.cycle_time_ms < 0) c.cycle_time_ms = 0;
  if (c.cache_capacity < 0) c.cache_capacity = 0;
  return c;
}

std::vector<Config::Knob> Config::Describe() {
  std::vector<Knob> out;
  Config defaults;
#define HVD_DESCRIBE_FIELD(field, env, type, def, doc) \
  out.push_back({env, ToString(defaults.field), doc});
  HVD_CONFIG_KNOBS(HVD_DESCRIBE_FIELD)
#undef HVD_DESCRIBE_FIELD
  return out;
}

}  // namespace hvd
