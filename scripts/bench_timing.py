"""Timing helpers shared by the benchmarks (bench_allreduce.py, bench_tensorflow.py): every
rank starts a trial together, the slowest rank's time counts, and trials interleave the methods
so that a noisy moment on a shared machine hits each alike. Import after hvd.init()."""

import resource
import statistics
import time

from mpi4py import MPI

COMM = MPI.COMM_WORLD
RANK, N = COMM.rank, COMM.size


def say(*a):
    if RANK == 0:
        print(*a, flush=True)


def per_op_us(fn, n=2000, warm=200, quantile=0.5, sync=False):
    """This rank's `quantile` (the median by default) of n single calls of fn, in microseconds,
    after `warm` untimed ones. sync: every rank starts each call together (a barrier, untimed)."""
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(n):
        if sync:
            COMM.Barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[min(n - 1, int(n * quantile))] * 1e6


def trial(fn, iters, cpu=None):
    """Seconds per op: all ranks start together; the slowest rank's time counts. cpu: a list to
    which this rank's CPU seconds (user + system) and wall seconds over the trial are added."""
    COMM.Barrier()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    wall = time.perf_counter() - t0
    if cpu is not None:
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu[0] += r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        cpu[1] += wall
    return COMM.allreduce(wall / iters, op=MPI.MAX)


def median_times(fns, iters, trials=5, cpu=None):
    """Median seconds per op of each fn. Trials interleave the fns, so a noisy moment on this
    shared machine hits every method alike and the ratios stay fair. cpu: a list that gets, per
    fn, the share of a core each rank was busy during its trials (the busiest rank's), which
    tells a link-bound method from one that spins or computes."""
    for fn in fns:
        fn()  # warm-up: first-touch of buffers, negotiation of the name
    samples = [[] for _ in fns]
    used = [[0.0, 0.0] for _ in fns]
    for _ in range(trials):
        for fn, s, u in zip(fns, samples, used):
            s.append(trial(fn, iters, u))
    if cpu is not None:
        cpu.extend(COMM.allreduce(u[0] / u[1], op=MPI.MAX) for u in used)
    return [statistics.median(s) for s in samples]
