"""Allgather: the engine against MPI_Allgather, in one run, two ways.

    mpirun -np 2 python benchmarks/allgather.py [MiB ...]     (default: 256 1200)

The large case: for int8 inputs of each size per rank it prints the wall time per op (slowest
rank), the user and system CPU time and minor page faults summed over the ranks (getrusage of
each rank, every thread included), for
  engine      horovod.numpy.allgather(x): a new output each call, as the frontend returns it
  mpi         mpi4py comm.Allgather(x, y) into a new np.empty output each call (the same work)
  mpi-reuse   the same into one output reused across calls (its pages are faulted in once)
and the ratio engine/mpi (> 1: the engine is slower). Figures are the median of `--trials`
interleaved trials of one op each, after a warm-up op per method.

    horovodrun python benchmarks/allgather.py --sweep [--sizes 4K,1M,64M] [--trials 3]

The sweep by size: every rank contributes `size` bytes of float32 (the sizes are per rank); the
output holds n times that. Printed per size: time per op and bus bandwidth (busbw = output
bytes * (n-1)/n / time, the nccl-tests definition: what each rank receives), for
  engine  horovod.numpy.allgather(x, name=...): queue, negotiation, ring or hierarchical
          (HOROVOD_HIERARCHICAL_ALLGATHER decides, as in a job)
  mpi     mpi4py comm.Allgather(x, y) on the same ranks: Open MPI's MPI_Allgather
and engine/mpi (> 1: faster than MPI), and the share of a core each rank was busy in its
trials (the busiest rank). Each figure is the median of `trials` trials that interleave the
two methods (runner.median_times). `OP=allgather benchmarks/shaped.sh allreduce` runs it on
shaped links.
"""

import resource
import statistics
import time

import numpy as np

import horovod.numpy as hvd

hvd.init()
from mpi4py import MPI  # noqa: E402  (after hvd.init: Horovod initializes MPI)
from runner import (  # noqa: E402
    COMM,
    MIB,
    RANK,
    N,
    arguments,
    median_times,
    parse_args,
    parse_sizes,
    ratio,
    say,
    size_label,
)


def measure(fn):
    """(wall s of the slowest rank, user s, sys s, minor faults summed over ranks) of one fn()."""
    COMM.Barrier()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    del out  # freed before the next trial, as a training loop would
    mine = (r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt)
    return (COMM.allreduce(wall, op=MPI.MAX),) + tuple(COMM.allreduce(v) for v in mine)


def large(mib, trials):
    x = np.full(mib * MIB, RANK + 1, np.int8)
    reused = np.empty(N * x.size, np.int8)
    name = f"bench/ag/{mib}"

    def engine():
        return hvd.allgather(x, name=name)

    def mpi():
        y = np.empty(N * x.size, np.int8)
        COMM.Allgather(x, y)
        return y

    def mpi_reuse():
        COMM.Allgather(x, reused)
        return None

    methods = [("engine", engine), ("mpi", mpi), ("mpi-reuse", mpi_reuse)]
    for _, fn in methods:
        out = fn()  # warm-up: negotiation of the name, the reused buffer's first touch
        if out is not None:
            assert out[: x.size].min() == 1 and out[-x.size :].max() == N, "wrong result"
        del out
    samples = {m: [] for m, _ in methods}
    for _ in range(trials):
        for m, fn in methods:
            samples[m].append(measure(fn))
    rows = {}
    for m, _ in methods:
        cols = list(zip(*samples[m]))
        rows[m] = [statistics.median(c) for c in cols]
        wall, user, sys_, faults = rows[m]
        gbs = N * x.nbytes / wall / 1e9
        say(
            f"{mib:>6} MiB {m:>10}: {wall:7.3f} s ({gbs:5.2f} GB/s out)  user {user:6.2f} s  "
            f"sys {sys_:6.2f} s  minor faults {faults / 1e3:8.0f}k"
        )
    say(
        f"{mib:>6} MiB   engine/mpi {rows['engine'][0] / rows['mpi'][0]:.2f}   "
        f"engine/mpi-reuse {rows['engine'][0] / rows['mpi-reuse'][0]:.2f}"
    )


def busbw(nbytes_per_rank, seconds):
    return nbytes_per_rank * N * (N - 1) / N / seconds / 1e9


def sweep(sizes, trials):
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
            trials,
            cpu,
        )
        out = hvd.allgather(x, name=name)
        want = np.repeat(np.arange(1, N + 1, dtype=np.float32), x.size)
        assert np.array_equal(out, want) and np.array_equal(y, want), "results"
        say(
            f"{size_label(nbytes):>8} | {t_engine * 1e6:10.1f} {busbw(nbytes, t_engine):6.3f} | "
            f"{t_mpi * 1e6:10.1f} {busbw(nbytes, t_mpi):6.3f} | {ratio(t_engine, t_mpi):10.2f} | "
            f"{cpu[0]:19.2f} {cpu[1]:4.2f}"
        )


def main():
    ap = arguments(__doc__, sizes="4K,1M,64M", trials=3)
    ap.add_argument("mib", nargs="*", type=int, default=[256, 1200], help="the large case's MiB")
    ap.add_argument("--sweep", action="store_true", help="float32 by --sizes (per rank) instead")
    args = parse_args(ap)
    if args.sweep:
        sweep(parse_sizes(args.sizes), args.trials)
        hvd.shutdown()
        return
    say(f"allgather of int8, {N} ranks, MiB per rank; sums over ranks of user/sys/faults")
    for mib in args.mib:
        large(mib, args.trials)


if __name__ == "__main__":
    main()
