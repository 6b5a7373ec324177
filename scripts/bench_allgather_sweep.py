"""Allgather sweep: the engine against MPI_Allgather by size, in one run (bench_allgather.py is
the 1.2 GB case with system time and page faults).

    horovodrun python scripts/bench_allgather_sweep.py [--sizes 4K,1M,64M] [--trials 3]

Every rank contributes `size` bytes of float32 (the sizes are per rank); the output holds n
times that. Printed per size: time per op and bus bandwidth (busbw = output bytes * (n-1)/n /
time, the nccl-tests definition: what each rank receives), for
  engine  horovod.numpy.allgather(x, name=...): queue, negotiation, ring or hierarchical
          (HOROVOD_HIERARCHICAL_ALLGATHER decides, as in a job)
  mpi     mpi4py comm.Allgather(x, y) on the same ranks: Open MPI's MPI_Allgather
and engine/mpi (> 1: faster than MPI), and the share of a core each rank was busy in its
trials (the busiest rank). Each figure is the median of `trials` trials that interleave the
two methods (bench_timing.median_times). scripts/bench_shaped_allreduce.sh runs it with
OP=allgather.
"""

import argparse

import numpy as np

import horovod.numpy as hvd

hvd.init()
from bench_timing import COMM, RANK, N, median_times, say  # noqa: E402
from mpi4py import MPI  # noqa: E402  (after hvd.init: Horovod initializes MPI)

KIB, MIB = 1 << 10, 1 << 20


def busbw(nbytes_per_rank, seconds):
    return nbytes_per_rank * N * (N - 1) / N / seconds / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4K,1M,64M", help="bytes per rank, in KiB/MiB: 4K,64M")
    ap.add_argument("--trials", type=int, default=3, help="interleaved trials per size")
    args = ap.parse_args()
    unit = {"K": KIB, "M": MIB}
    sizes = [int(s[:-1]) * unit[s[-1].upper()] for s in args.sizes.split(",")]
    mpi_version = MPI.Get_library_version().replace(chr(0), "").splitlines()[0]
    algo = hvd.build_info().get("cpu_operations", "?")
    say(f"# {N} ranks, float32 allgather, sizes per rank; {mpi_version}; cpu_operations={algo}")
    say(
        f"{'size':>8} | {'engine us':>10} {'GB/s':>6} | {'mpi us':>10} {'GB/s':>6} | "
        f"{'engine/mpi':>10} | CPU/rank engine mpi"
    )
    for nbytes in sizes:
        x = np.full(nbytes // 4, RANK + 1, np.float32)
        y = np.empty(x.size * N, np.float32)
        iters = max(2, min(1000, (64 * MIB) // (nbytes * N)))
        name = f"bench.ag.{nbytes}"
        cpu = []
        t_engine, t_mpi = median_times(
            [lambda: hvd.allgather(x, name=name), lambda: COMM.Allgather(x, y)],
            iters,
            args.trials,
            cpu,
        )
        out = hvd.allgather(x, name=name)
        want = np.repeat(np.arange(1, N + 1, dtype=np.float32), x.size)
        assert np.array_equal(out, want) and np.array_equal(y, want), "results"
        label = f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"
        say(
            f"{label:>8} | {t_engine * 1e6:10.1f} {busbw(nbytes, t_engine):6.3f} | "
            f"{t_mpi * 1e6:10.1f} {busbw(nbytes, t_mpi):6.3f} | {t_mpi / t_engine:10.2f} | "
            f"{cpu[0]:19.2f} {cpu[1]:4.2f}"
        )
    hvd.shutdown()


if __name__ == "__main__":
    main()
