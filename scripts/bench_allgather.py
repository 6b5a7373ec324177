"""Large allgather: our engine vs MPI_Allgather, with the system time each costs, in one run.

    mpirun -np 2 python scripts/bench_allgather.py [MiB ...]     (default: 256 1200)

For int8 inputs of each size per rank it prints the wall time per op (slowest rank), the user
and system CPU time and minor page faults summed over the ranks (getrusage of each rank, every
thread included), for
  engine      horovod.numpy.allgather(x): a new output each call, as the frontend returns it
  mpi         mpi4py comm.Allgather(x, y) into a new np.empty output each call (the same work)
  mpi-reuse   the same into one output reused across calls (its pages are faulted in once)
and the ratio engine/mpi (> 1: the engine is slower). Figures are the median of `--trials`
interleaved trials of one op each, after a warm-up op per method.
"""

import argparse
import resource
import statistics
import time

import numpy as np

import horovod.numpy as hvd

hvd.init()
from bench_timing import COMM, RANK, N, say  # noqa: E402
from mpi4py import MPI  # noqa: E402  (after hvd.init: Horovod initializes MPI)

MIB = 1 << 20


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


def run(mib, trials):
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mib", nargs="*", type=int, default=[256, 1200])
    p.add_argument("--trials", type=int, default=3)
    args = p.parse_args()
    say(f"allgather of int8, {N} ranks, MiB per rank; sums over ranks of user/sys/faults")
    for mib in args.mib:
        run(mib, args.trials)


if __name__ == "__main__":
    main()
