// Every HOROVOD_* knob the engine reads, declared once with its default, its bounds, whether all
// ranks must agree on it, and one line of doc. Config::FromEnvironment() parses them strictly at
// init; `python -c "import horovod.common.basics as b; print(b.config_knobs())"` prints the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvd {

// Knobs marked AGREE change message sizes, algorithms, fusion or the cache's bit vector: ranks
// that differ would exchange mismatched messages (truncated messages) or wait forever, so Init
// compares them across ranks and fails on every rank, naming the knob and each rank's value.
// The stall knobs agree so that every rank's watchdog reports the same blocked section at the
// same time. HOROVOD_SUMMARY agrees because a summary gathers from every rank at shutdown.
// LOCAL knobs may differ.
enum class Scope { LOCAL, AGREE };

// X(field, ENV_NAME, type, default, min, max, scope, doc); min/max bound numeric knobs only.
#define HVD_CONFIG_KNOBS(X)                                                                       \
  X(fusion_threshold, "HOROVOD_FUSION_THRESHOLD", int64_t, 128LL << 20, 0, 64LL << 30, AGREE,     \
    "bytes of ready tensors packed into one fused allreduce; 0 disables fusion")                  \
  X(cycle_time_ms, "HOROVOD_CYCLE_TIME", double, 1.0, 0, 1000, LOCAL,                             \
    "ms between negotiation rounds when no new work arrives (new work wakes the loop at once)")   \
  X(spin_wait_us, "HOROVOD_SPIN_WAIT_US", int64_t, 50, 0, 100000, LOCAL,                          \
    "us a waiting thread polls before it blocks (the engine after running ops, a caller for its " \
    "result); only with 2 cores per rank of the machine, no rank bound to one core, and Open "    \
    "MPI not told to yield; 0: never")                                                            \
  X(data_wait_spin_us, "HOROVOD_DATA_WAIT_SPIN_US", int64_t, 1000, 0, 100000000, LOCAL,           \
    "us a collective polls its transfers before it naps between polls (10-100 us), so a rank "    \
    "waiting on a slow link or a late peer leaves the core; a large value: always poll. Where "   \
    "the engine shares a core with the caller, each poll yields the core first")                  \
  X(cache_capacity, "HOROVOD_CACHE_CAPACITY", int64_t, 1024, 0, 1 << 20, AGREE,                   \
    "responses kept for the steady-state fast path (one bit-vector allreduce); 0 disables it")    \
  X(cpu_operations, "HOROVOD_CPU_OPERATIONS", std::string, "ring", 0, 0, AGREE,                   \
    "CPU allreduce: 'ring' (our reduce-scatter + allgather) or 'mpi' (MPI_Allreduce baseline)")   \
  X(ring_chunk_bytes, "HOROVOD_RING_CHUNK_BYTES", int64_t, 1LL << 20, 64, 1LL << 30, AGREE,       \
    "pipelining unit of the ring: a chunk is reduced while the next one is in flight")            \
  X(small_allreduce_bytes, "HOROVOD_SMALL_ALLREDUCE_BYTES", int64_t, 32LL << 10, 0, 16LL << 20,   \
    AGREE, "allreduces up to this size exchange whole buffers in one step instead of the ring")   \
  X(eager_allreduce_bytes, "HOROVOD_EAGER_ALLREDUCE_BYTES", int64_t, 16LL << 10, 0, 1LL << 20,    \
    AGREE,                                                                                        \
    "jobs of up to 8 ranks: bytes of small cached allreduces a rank sends along with its "        \
    "negotiation message each round; those ready on every rank are reduced there, one round "     \
    "trip instead of two; 0: off")                                                                \
  X(hierarchical_allreduce, "HOROVOD_HIERARCHICAL_ALLREDUCE", std::string, "auto", 0, 0, AGREE,   \
    "ring allreduce inside each host, across hosts per local rank on 1/local_size of the data, "  \
    "then allgather inside: 'auto' (on with several hosts, several ranks on a host and the same " \
    "number on each), '1' (on where the hosts allow it, else says why not) or '0'")               \
  X(hierarchical_allgather, "HOROVOD_HIERARCHICAL_ALLGATHER", std::string, "auto", 0, 0, AGREE,   \
    "allgather across hosts per local rank, then inside each host: 'auto', '1' or '0' as for "    \
    "HOROVOD_HIERARCHICAL_ALLREDUCE")                                                             \
  X(topology_ranks_per_host, "HOROVOD_TOPOLOGY_RANKS_PER_HOST", int64_t, 0, 0, 1 << 20, AGREE,    \
    "tests on one machine: every N consecutive ranks count as one host (local rank, local "       \
    "size, hierarchical collectives); 0 = the hosts the transport sees")                          \
  X(timeline, "HOROVOD_TIMELINE", std::string, "", 0, 0, LOCAL,                                   \
    "path of a Chrome-trace JSON file written by rank 0; empty disables the timeline")            \
  X(timeline_mark_cycles, "HOROVOD_TIMELINE_MARK_CYCLES", bool, false, 0, 0, LOCAL,               \
    "a CYCLE_START event in the timeline for each negotiation round that ran ops")                \
  X(autotune, "HOROVOD_AUTOTUNE", bool, false, 0, 0, LOCAL,                                       \
    "rank 0 tunes the fusion threshold and cycle time while the job runs, then keeps the best "   \
    "(a knob set explicitly is held at its value)")                                               \
  X(autotune_log, "HOROVOD_AUTOTUNE_LOG", std::string, "", 0, 0, LOCAL,                           \
    "CSV file rank 0 writes autotune's trials to: one row per sample, the chosen one last")       \
  X(autotune_warmup_samples, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", int64_t, 3, 0, 1000, LOCAL,       \
    "autotune: samples discarded at the start, before settings are compared")                     \
  X(autotune_steps_per_sample, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", int64_t, 10, 1, 1000000,      \
    LOCAL, "autotune: negotiation rounds that ran ops per sample (one setting's score)")          \
  X(autotune_bayes_opt_max_samples, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", int64_t, 20, 1,     \
    1000, LOCAL, "autotune: at most this many scored samples (settings tried) before it stops")   \
  X(join_average, "HOROVOD_JOIN_AVERAGE", std::string, "set", 0, 0, AGREE,                        \
    "Average while ranks have joined: 'set' divides by the set's size, the joined ranks' zeros "  \
    "counted (upstream's), 'contributors' by the ranks that submitted")                           \
  X(stall_check_disable, "HOROVOD_STALL_CHECK_DISABLE", bool, false, 0, 0, AGREE,                 \
    "turn off the stall inspector and the watchdog of blocked rounds and collectives")            \
  X(stall_check_time_s, "HOROVOD_STALL_CHECK_TIME_SECONDS", double, 60.0, 0.1, 1e6, AGREE,        \
    "seconds a tensor may wait for other ranks before rank 0 logs who is missing, and a "         \
    "negotiation round or collective may make no progress before it is logged with its peers")    \
  X(stall_shutdown_time_s, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", double, 0.0, 0, 1e6, AGREE,     \
    "seconds after which a stalled tensor shuts the engine down on every rank and a round or "    \
    "collective without progress aborts the job; 0 = never, else at least the check time")        \
  X(log_level, "HOROVOD_LOG_LEVEL", std::string, "warning", 0, 0, LOCAL,                          \
    "trace, debug, info, warning or error")                                                       \
  X(mpi_threads_disable, "HOROVOD_MPI_THREADS_DISABLE", bool, false, 0, 0, LOCAL,                 \
    "initialize MPI with MPI_THREAD_SERIALIZED instead of MPI_THREAD_MULTIPLE (the watchdog "     \
    "then cannot name the ranks missing from a negotiation round)")                               \
  X(summary_level, "HOROVOD_SUMMARY", int64_t, 1, 0, 2, AGREE,                                    \
    "communication summary rank 0 prints to stderr when the job shuts down: 0 off, 1 the job, "   \
    "2 the job and one line per rank")                                                            \
  X(link_gbps, "HOROVOD_LINK_GBPS", double, 0.0, 0, 1e5, LOCAL,                                   \
    "the slowest link between the job's hosts in GB/s, for the summary to compare the job's "     \
    "allreduce with; horovodrun sets it from a saved --check-network result; 0: unknown")         \
  X(link_at_once_gbps, "HOROVOD_LINK_AT_ONCE_GBPS", double, 0.0, 0, 1e5, LOCAL,                   \
    "the slowest of the job's links measured all busy at once, as a ring keeps them, in GB/s "    \
    "(hosts that share CPUs or a NIC carry less each this way than alone); horovodrun sets it "   \
    "from a saved --check-network result; 0: unknown")                                            \
  X(transport, "HOROVOD_TRANSPORT", std::string, "auto", 0, 0, LOCAL,                             \
    "how ranks reach each other: 'mpi' (started by mpirun), 'tcp' (sockets from a rendezvous: "   \
    "torchrun's or upstream Gloo's variables, horovodrun --gloo), or 'auto' (tcp where those "    \
    "variables are set and no MPI launcher's are, else mpi)")                                     \
  X(rendezvous_timeout_s, "HOROVOD_RENDEZVOUS_TIMEOUT", double, 120.0, 1, 86400, LOCAL,           \
    "tcp transport: seconds every rank may take to reach the rendezvous and its peers before "    \
    "init fails, naming the address and the ranks missing")                                       \
  X(tcp_single_copy, "HOROVOD_TCP_SINGLE_COPY", bool, true, 0, 0, LOCAL,                          \
    "tcp transport: a rank's large messages to ranks of its machine are copied once, by the "     \
    "receiver, from its memory (process_vm_readv) where the kernel allows it; 0: over the socket")

struct Config {
#define HVD_DECLARE_FIELD(field, env, type, def, lo, hi, scope, doc) type field = def;
  HVD_CONFIG_KNOBS(HVD_DECLARE_FIELD)
#undef HVD_DECLARE_FIELD
  std::vector<std::string> set_in_environment;  // the knobs FromEnvironment found set

  // Reads every knob from the environment. A malformed or out-of-range value is an error naming
  // the variable, its value and what is accepted; the first such error is returned.
  static Config FromEnvironment(std::string* error);
  // Whether FromEnvironment found the knob `env` set (autotune holds such knobs fixed).
  bool IsSet(const std::string& env) const;
  // "ENV=value" lines of the AGREE knobs, as parsed (so "1048576" and "1048576 " compare equal).
  std::string AgreedValues() const;

  // Checks one knob's value exactly as FromEnvironment parses it (same parser, bounds and
  // allowed values): "" if valid, else the error FromEnvironment reports for it, naming the
  // variable. Launchers call it before starting ranks. An unknown name is an error. The rule
  // between two knobs (shutdown time >= check time) is FromEnvironment's alone.
  static std::string Check(const std::string& env, const std::string& value);

  struct Knob {
    std::string env, default_value, doc;
    std::string type;                  // "int", "float", "bool" or "string"
    double min = 0, max = 0;           // bounds of "int" and "float" knobs
    std::vector<std::string> choices;  // the values a "string" knob accepts; empty: any
    bool agree = false;                // must be equal on every rank (Scope::AGREE)
  };
  static std::vector<Knob> Describe();
};

// Given every rank's parse error (empty if none) and AgreedValues(), the error every rank
// raises, identically: bad values with their ranks first, then each knob the ranks disagree on
// with each rank's value. Empty if the configuration is consistent.
std::string CheckConfigAcrossRanks(const std::vector<std::string>& errors,
                                   const std::vector<std::string>& agreed);

}  // namespace hvd
