#include "engine/cpu_share.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hvd {
namespace {

// CPUs a cgroup CPU quota allows (docker --cpus, compose cpus:), rounded up; 0: no quota. cgroup
// v2's cpu.max, else v1's cfs quota and period (both are in use on Docker hosts).
long CpuQuota() {
  long quota = 0, period = 0;
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r")) {
    char q[32] = {0};
    if (std::fscanf(f, "%31s %ld", q, &period) == 2 && std::strcmp(q, "max") != 0)
      quota = std::atol(q);
    std::fclose(f);
  } else if (FILE* fq = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r")) {
    if (std::fscanf(fq, "%ld", &quota) != 1) quota = 0;
    std::fclose(fq);
    if (FILE* fp = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r")) {
      if (std::fscanf(fp, "%ld", &period) != 1) period = 0;
      std::fclose(fp);
    }
  }
  if (quota <= 0 || period <= 0) return 0;
  return std::max(1L, (quota + period - 1) / period);
}

}  // namespace

// The engine's thread has no core of its own: this rank is bound to one core (caller and engine
// take turns on it), or the ranks of the machine (containers included) have fewer than two each.
bool SharesCore(int ranks_on_machine) {
  cpu_set_t set;
  int mine = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) mine = CPU_COUNT(&set);
  if (mine < 2) return true;
  // The machine's cores, or fewer under a cgroup CPU quota (docker --cpus, compose cpus:), for
  // the ranks of every container on it.
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const long quota = CpuQuota();
  if (quota > 0) cores = std::min(cores, quota);
  return cores < 2L * ranks_on_machine;
}

// How long a waiting thread (the engine for its next op, a caller for its result) polls before
// it blocks. Blocking costs a wake-up: tens of microseconds on a VM whose idle vCPU halts, which
// is most of a small allreduce's time. Polling is worth it only with a core per polling thread
// (this rank's caller and engine): never where a rank is bound to one core, where the ranks of
// the machine (containers included) have fewer than two cores each, or where Open MPI was told
// to yield (mpi_yield_when_idle).
// Measured on 16 quiet cores, 2 ranks, 4 KiB: 50-65 us blocking, 26-32 us polling 30-60 us,
// no gain at 10 us.
int64_t ChooseSpin(int64_t want, bool shares_core) {
  if (want <= 0 || shares_core) return 0;
  const char* yield = std::getenv("OMPI_MCA_mpi_yield_when_idle");
  if (yield && std::string(yield) == "1") return 0;
  return want;
}

}  // namespace hvd
