"""What every benchmark under benchmarks/ shares, so that a new one is a function: every rank
starts a trial together, the slowest rank's time counts, and trials interleave the methods so
that a noisy moment on a shared machine hits each alike (median_times); the --sizes/--trials
arguments and the size labels of the sweeps; the ratio against the peer measured in the same
run; and, with --record NAME, a copy of rank 0's lines in docs/bench/NAME.txt, where the
recorded outputs live (`make plots` draws them). Import after hvd.init()."""

import argparse
import pathlib
import resource
import statistics
import time

from mpi4py import MPI

COMM = MPI.COMM_WORLD
RANK, N = COMM.rank, COMM.size
KIB, MIB = 1 << 10, 1 << 20
RECORDS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "bench"
_record = None  # rank 0's copy of its lines (--record), opened by parse_args


def say(*a):
    if RANK == 0:
        print(*a, flush=True)
        if _record is not None:
            print(*a, file=_record, flush=True)


def parse_sizes(text):
    """Bytes of each comma-separated size in KiB or MiB: "4K,64M" -> [4096, 67108864]."""
    unit = {"K": KIB, "M": MIB}
    return [int(s[:-1]) * unit[s[-1].upper()] for s in text.split(",")]


def size_label(nbytes):
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"


def ratio(mine, peer):
    """Our time against the peer's measured in the same run: > 1 means we are faster."""
    return peer / mine


def arguments(doc, sizes=None, trials=5):
    """A parser with what the sweeps share: --sizes (a default when sizes is given), --trials
    (interleaved, the median counts) and --record NAME (rank 0's lines also go to
    docs/bench/NAME.txt). The benchmark adds its own, then calls parse_args."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    if sizes is not None:
        ap.add_argument("--sizes", default=sizes, help="comma-separated sizes in KiB/MiB: 4K,64M")
    ap.add_argument(
        "--trials", type=int, default=trials, help="interleaved trials per size (the median counts)"
    )
    ap.add_argument("--record", metavar="NAME", help="also write the lines to docs/bench/NAME.txt")
    return ap


def parse_args(ap, argv=None):
    """ap's arguments; --record opens its file here, so that every later say() lands in it."""
    global _record
    args = ap.parse_args(argv)
    if args.record and RANK == 0:
        path = RECORDS / f"{args.record}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        _record = open(path, "w")
    return args


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
