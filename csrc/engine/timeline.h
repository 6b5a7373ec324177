// Chrome-trace timeline (HOROVOD_TIMELINE=/path.json), written by rank 0 only. Every tensor
// gets its own row (pid): a NEGOTIATE_<OP> span with one tick per rank as it reports ready,
// then the <OP> span with nested activities (MEMCPY_IN_FUSION_BUFFER, RING_ALLREDUCE, ...).
// Events are queued under a mutex and written by a writer thread, so the background loop never
// waits on the file; it appends and flushes every 100 ms, so a file read while the job runs
// holds the ops that ran (complete events: add "]" to parse it). The file is a valid JSON array
// after Shutdown().
#pragma once

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/common.h"

namespace hvd {

class Timeline {
 public:
  ~Timeline() { Shutdown(); }
  // Opens `path` and starts writing; after Shutdown() it may be called again (a new file).
  Status Init(const std::string& path, bool mark_cycles = false);
  bool enabled() const { return enabled_; }
  // Named in every file's first event (a process_labels metadata event: "transport: tcp").
  void SetTransport(const std::string& name) { transport_ = name; }

  void NegotiateStart(const std::string& name, OpType type, int64_t ts_us);
  void NegotiateRankReady(const std::string& name, int rank, int64_t ts_us);
  void NegotiateEnd(const std::string& name, int64_t ts_us);
  void OpStart(const std::string& name, OpType type);
  void ActivityStart(const std::string& name, const char* activity);
  void ActivityEnd(const std::string& name);
  void OpEnd(const std::string& name);
  void MarkCycle();  // a CYCLE_START instant event, if Init asked for them
  void Shutdown();

 private:
  int PidFor(const std::string& name);
  std::string transport_;
  void Event(const std::string& name, char phase, int pid, int64_t ts_us, const char* extra = "");
  void WriterLoop();

  bool enabled_ = false, mark_cycles_ = false;
  int64_t start_us_ = 0;
  std::FILE* file_ = nullptr;
  std::unordered_map<std::string, int> pids_;  // background thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool stop_ = false, first_ = true;
  std::thread writer_;
};

}  // namespace hvd
