#include "engine/timeline.h"

#include <chrono>

namespace hvd {
namespace {

// How often the writer thread appends what was queued and flushes: a file read while the job
// runs holds every op that ran more than this long ago (a complete event list, so appending
// "]" makes it valid JSON).
constexpr int kFlushEveryMs = 100;

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else
      out += c;
  }
  return out;
}

}  // namespace

Status Timeline::Init(const std::string& path, bool mark_cycles) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) return Status::InvalidArgument("timeline: cannot open '" + path + "' for writing");
  // Flushed at once: a reader of a running job's file finds at least the opening bracket.
  std::fputs("[\n", file_);
  std::fflush(file_);
  // A new file: its own process metadata, and the state a previous Shutdown() left.
  pids_.clear();
  pending_.clear();
  stop_ = false;
  first_ = true;
  if (!transport_.empty()) {
    pending_ =
        "{\"name\": \"process_labels\", \"ph\": \"M\", \"pid\": 0, \"args\": "
        "{\"labels\": \"transport: " +
        JsonEscape(transport_) + "\"}}";
    first_ = false;
  }
  mark_cycles_ = mark_cycles;
  start_us_ = NowMicros();
  enabled_ = true;
  writer_ = std::thread(&Timeline::WriterLoop, this);
  return Status();
}

int Timeline::PidFor(const std::string& name) {
  auto it = pids_.find(name);
  if (it != pids_.end()) return it->second;
  int pid = static_cast<int>(pids_.size()) + 1;
  pids_[name] = pid;
  std::string meta = "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(pid) +
                     ", \"args\": {\"name\": \"" + JsonEscape(name) + "\"}}";
  meta += ",\n{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + std::to_string(pid) +
          ", \"args\": {\"sort_index\": " + std::to_string(pid) + "}}";
  std::lock_guard<std::mutex> lk(mu_);
  if (!first_) pending_ += ",\n";
  first_ = false;
  pending_ += meta;
  return pid;
}

void Timeline::Event(const std::string& name, char phase, int pid, int64_t ts_us,
                     const char* extra) {
  std::string ev = "{\"name\": \"" + JsonEscape(name) + "\", \"ph\": \"" + phase +
                   "\", \"ts\": " + std::to_string(ts_us - start_us_) +
                   ", \"pid\": " + std::to_string(pid) + ", \"tid\": 1" + extra + "}";
  std::lock_guard<std::mutex> lk(mu_);
  if (!first_) pending_ += ",\n";
  first_ = false;
  pending_ += ev;
}

void Timeline::NegotiateStart(const std::string& name, OpType type, int64_t ts) {
  if (!enabled_) return;
  Event(std::string("NEGOTIATE_") + OpTypeName(type), 'B', PidFor(name), ts);
}

void Timeline::NegotiateRankReady(const std::string& name, int rank, int64_t ts) {
  if (!enabled_) return;
  Event(std::to_string(rank), 'X', PidFor(name), ts, ", \"dur\": 1");
}

void Timeline::NegotiateEnd(const std::string& name, int64_t ts) {
  if (!enabled_) return;
  Event("", 'E', PidFor(name), ts);
}

void Timeline::OpStart(const std::string& name, OpType type) {
  if (!enabled_) return;
  Event(OpTypeName(type), 'B', PidFor(name), NowMicros());
}

void Timeline::ActivityStart(const std::string& name, const char* activity) {
  if (!enabled_) return;
  Event(activity, 'B', PidFor(name), NowMicros());
}

void Timeline::ActivityEnd(const std::string& name) {
  if (!enabled_) return;
  Event("", 'E', PidFor(name), NowMicros());
}

void Timeline::OpEnd(const std::string& name) { ActivityEnd(name); }

void Timeline::MarkCycle() {
  if (!enabled_ || !mark_cycles_) return;
  const std::string ev = "{\"name\": \"CYCLE_START\", \"ph\": \"i\", \"s\": \"g\", \"ts\": " +
                         std::to_string(NowMicros() - start_us_) + ", \"pid\": 0, \"tid\": 0}";
  std::lock_guard<std::mutex> lk(mu_);
  if (!first_) pending_ += ",\n";
  first_ = false;
  pending_ += ev;
}

void Timeline::WriterLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait_for(lk, std::chrono::milliseconds(kFlushEveryMs), [this] { return stop_; });
    std::string chunk;
    chunk.swap(pending_);
    bool stop = stop_;
    lk.unlock();
    if (!chunk.empty()) std::fwrite(chunk.data(), 1, chunk.size(), file_);
    std::fflush(file_);
    lk.lock();
    if (stop && pending_.empty()) return;
  }
}

void Timeline::Shutdown() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  writer_.join();
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
  enabled_ = false;
}

}  // namespace hvd
