// Every HOROVOD_* knob the engine reads, declared once with its default and one line of doc.
// Config::FromEnvironment() reads them at init; `python -m horovod.common.config` (through the
// bindings) prints this table.
#pragma once

#include <string>
#include <vector>

namespace hvd {

// X(field, ENV_NAME, type, default, doc)
#define HVD_CONFIG_KNOBS(X)                                                                      \
  X(fusion_threshold, "HOROVOD_FUSION_THRESHOLD", int64_t, 128LL << 20,                          \
    "bytes of ready tensors packed into one fused allreduce; 0 disables fusion")                  \
  X(cycle_time_ms, "HOROVOD_CYCLE_TIME", double, 1.0,                                            \
    "ms between negotiation rounds when no new work arrives (new work wakes the loop at once)")  \
  X(cache_capacity, "HOROVOD_CACHE_CAPACITY", int64_t, 1024,                                     \
    "responses kept for the steady-state fast path (one bit-vector allreduce); 0 disables it")   \
  X(cpu_operations, "HOROVOD_CPU_OPERATIONS", std::string, "ring",                               \
    "CPU allreduce: 'ring' (our reduce-scatter + allgather) or 'mpi' (MPI_Allreduce baseline)")  \
  X(ring_chunk_bytes, "HOROVOD_RING_CHUNK_BYTES", int64_t, 1LL << 20,                            \
    "pipelining unit of the ring: a chunk is reduced while the next one is in flight")           \
  X(small_allreduce_bytes, "HOROVOD_SMALL_ALLREDUCE_BYTES", int64_t, 32LL << 10,                \
    "allreduces up to this size exchange whole buffers in one step instead of the ring")        \
  X(timeline, "HOROVOD_TIMELINE", std::string, "",                                               \
    "path of a Chrome-trace JSON file written by rank 0; empty disables the timeline")           \
  X(stall_check_disable, "HOROVOD_STALL_CHECK_DISABLE", bool, false,                             \
    "turn off the stall inspector and the watchdog of blocked rounds and collectives")          \
  X(stall_check_time_s, "HOROVOD_STALL_CHECK_TIME_SECONDS", double, 60.0,                        \
    "seconds a tensor may wait for other ranks before rank 0 logs who is missing, and a "       \
    "negotiation round or collective may stay blocked before it is logged with its peers")      \
  X(stall_shutdown_time_s, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", double, 0.0,                   \
    "seconds after which a stalled tensor shuts the engine down on every rank and a blocked "   \
    "round or collective aborts the job; 0 = never")                                           \
  X(log_level, "HOROVOD_LOG_LEVEL", std::string, "warning",                                      \
    "trace, debug, info, warning or error")                                                      \
  X(mpi_threads_disable, "HOROVOD_MPI_THREADS_DISABLE", bool, false,                             \
    "initialize MPI with MPI_THREAD_SERIALIZED instead of MPI_THREAD_MULTIPLE")

struct Config {
#define HVD_DECLARE_FIELD(field, env, type, def, doc) type field = def;
  HVD_CONFIG_KNOBS(HVD_DECLARE_FIELD)
#undef HVD_DECLARE_FIELD

  // Reads every knob from the environment; a malformed value is an error naming the variable.
  static Config FromEnvironment(std::string* error);

  struct Knob {
    std::string env, default_value, doc;
  };
  static std::vector<Knob> Describe();
};

}  // namespace hvd
