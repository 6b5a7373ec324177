"""Allreduce benchmark: our engine end to end vs our bare ring vs MPI_Allreduce, in one run.

    mpirun -np 2 --bind-to core python benchmarks/allreduce.py [--quick] [--record NAME]

For float32 buffers from 4 KiB to 256 MiB it prints time per op and bus bandwidth
(busbw = bytes * 2(n-1)/n / time, the nccl-tests definition) for
  engine  horovod.numpy.allreduce(x, op=Sum, name=..., out=y): queue, negotiation, ring
  ring    the bare ring on its own communicator (no queue, no negotiation), in place
  mpi     mpi4py comm.Allreduce(x, y, op=SUM) on the same ranks: Open MPI's MPI_Allreduce
and the ratios engine/mpi and ring/mpi (> 1: faster than MPI). The ceiling is the single-core
copy bandwidth of rank 0 (np.copyto of 256 MiB) measured in the same run. Then the latency of
a 4 KiB allreduce through the engine (median of single timed ops) and the fusion case: 100
tensors of 40 KiB submitted together vs one tensor of the same total size.
Each figure is the median of 5 trials that interleave the methods; a trial runs `iters` ops
back to back.
"""

import statistics
import time

import numpy as np

import horovod.numpy as hvd

hvd.init()
from mpi4py import MPI  # noqa: E402  (after hvd.init: Horovod initializes MPI)
from runner import (  # noqa: E402
    COMM,
    KIB,
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


def busbw(nbytes, seconds):
    return nbytes * 2 * (N - 1) / N / seconds / 1e9


def copy_bandwidth():
    a = np.ones(64 * MIB, np.float32)  # 256 MiB
    b = np.empty_like(a)
    best = float("inf")
    COMM.Barrier()
    if RANK == 0:
        for _ in range(5):
            t0 = time.perf_counter()
            np.copyto(b, a)
            best = min(best, time.perf_counter() - t0)
    COMM.Barrier()
    return a.nbytes / best / 1e9 if RANK == 0 else 0.0


def sweep(sizes, trials=5):
    say(
        f"{'size':>8} | {'engine us':>10} {'GB/s':>6} | {'ring us':>10} {'GB/s':>6} | "
        f"{'mpi us':>10} {'GB/s':>6} | {'engine/mpi':>10} {'ring/mpi':>8} | "
        "CPU/rank engine ring mpi"
    )
    rows = []
    for nbytes in sizes:
        x = np.full(nbytes // 4, RANK + 1, np.float32)
        y = np.empty_like(x)
        ring_buf = x.copy()
        iters = max(2, min(1000, (256 * MIB) // nbytes))
        name = f"bench.{nbytes}"
        y2 = np.empty_like(x)
        cpu = []
        t_engine, t_ring, t_mpi = median_times(
            [
                lambda: hvd.allreduce(x, op=hvd.Sum, name=name, out=y),
                lambda: hvd.ring_allreduce_raw(ring_buf),
                lambda: COMM.Allreduce(x, y2, op=MPI.SUM),
            ],
            iters,
            trials,
            cpu,
        )
        assert y[0] == N * (N + 1) / 2 and y2[0] == y[0], "results"
        say(
            f"{size_label(nbytes):>8} | {t_engine * 1e6:10.1f} {busbw(nbytes, t_engine):6.2f} | "
            f"{t_ring * 1e6:10.1f} {busbw(nbytes, t_ring):6.2f} | "
            f"{t_mpi * 1e6:10.1f} {busbw(nbytes, t_mpi):6.2f} | "
            f"{ratio(t_engine, t_mpi):10.2f} {ratio(t_ring, t_mpi):8.2f} | "
            f"{cpu[0]:15.2f} {cpu[1]:4.2f} {cpu[2]:4.2f}"
        )
        rows.append((nbytes, t_engine, t_ring, t_mpi))
    return rows


def small_latency(iters=2000):
    x = np.ones(1024, np.float32)  # 4 KiB
    y = np.empty_like(x)
    for _ in range(100):
        hvd.allreduce(x, op=hvd.Sum, name="lat", out=y)
    samples = []
    COMM.Barrier()
    for _ in range(iters):
        t0 = time.perf_counter()
        hvd.allreduce(x, op=hvd.Sum, name="lat", out=y)
        samples.append(time.perf_counter() - t0)
    med = statistics.median(samples)
    return max(COMM.allgather(med)), statistics.quantiles(samples, n=100)[98]


def fusion_case(iters=50):
    parts = [np.ones(10 * KIB, np.float32) for _ in range(100)]  # 100 x 40 KiB
    whole = np.ones(100 * 10 * KIB, np.float32)  # same 4000 KiB in one tensor
    out = np.empty_like(whole)

    def async_loop():
        hs = [
            hvd.allreduce_async(p, op=hvd.Sum, name=f"fuse.async.{i}") for i, p in enumerate(parts)
        ]
        for h in hs:
            hvd.synchronize(h)

    return median_times(
        [
            lambda: hvd.grouped_allreduce(parts, op=hvd.Sum, name="fuse"),
            async_loop,
            lambda: hvd.allreduce(whole, op=hvd.Sum, name="fuse.whole", out=out),
        ],
        iters,
    )


def latency_and_idle(iters=2000, idle_s=3.0):
    """Part 5 of issue 20: a 4 KiB allreduce through the engine against MPI_Allreduce, single
    timed ops interleaved in blocks of 100 (slowest rank's median each), then the CPU this
    process uses while idle (engine up, nothing submitted) over `idle_s` from getrusage."""
    import resource

    x = np.ones(1024, np.float32)  # 4 KiB
    y, y2 = np.empty_like(x), np.empty_like(x)
    ops = {
        "engine": lambda: hvd.allreduce(x, op=hvd.Sum, name="lat", out=y),
        "mpi": lambda: COMM.Allreduce(x, y2, op=MPI.SUM),
    }
    samples = {k: [] for k in ops}
    for fn in ops.values():
        for _ in range(100):
            fn()
    COMM.Barrier()
    for _ in range(iters // 100):
        for k, fn in ops.items():
            for _ in range(100):
                t0 = time.perf_counter()
                fn()
                samples[k].append(time.perf_counter() - t0)
    med = {k: max(COMM.allgather(statistics.median(v))) for k, v in samples.items()}
    COMM.Barrier()
    time.sleep(0.5)  # past any polling that follows the last op
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    time.sleep(idle_s)
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    idle = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (t1 - t0)
    idle_max = max(COMM.allgather(idle))
    say(
        f"# latency 4 KiB: engine {med['engine'] * 1e6:.1f} us, MPI_Allreduce "
        f"{med['mpi'] * 1e6:.1f} us (slowest rank's medians), ratio "
        f"{med['engine'] / med['mpi']:.2f}; idle CPU {100 * idle_max:.2f} % of a core "
        f"(busiest rank, {idle_s:.0f} s, nothing submitted)"
    )


def cpu_share(nbytes=16 * MIB, iters=100):
    """Wall time per op and the share of it this process spent on a CPU (user, system), from
    getrusage around `iters` back-to-back ops: 100 % means the transport is CPU-bound."""
    import resource

    x = np.ones(nbytes // 4, np.float32)
    y = np.empty_like(x)
    for label, fn in (
        ("ring", lambda: hvd.ring_allreduce_raw(x)),
        ("mpi", lambda: COMM.Allreduce(x, y, op=MPI.SUM)),
    ):
        fn()
        COMM.Barrier()
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(iters):
            fn()
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        wall, user, sys_ = t1 - t0, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
        lines = COMM.gather(
            f"# cpu: rank {RANK} {label} {nbytes // MIB} MiB: {wall / iters * 1e3:.2f} ms/op, "
            f"busy {100 * (user + sys_) / wall:.0f}% (user {100 * user / wall:.0f}%, "
            f"system {100 * sys_ / wall:.0f}%)"
        )
        for line in lines or []:
            say(line)


def main():
    ap = arguments(__doc__, sizes="", trials=5)
    ap.add_argument("--quick", action="store_true", help="4 KiB .. 16 MiB only")
    ap.add_argument(
        "--sweep-only", action="store_true", help="the size sweep only (no latency, no fusion)"
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="only: CPU share of 16 MiB ring and MPI_Allreduce (is the transport CPU-bound?)",
    )
    ap.add_argument(
        "--latency",
        action="store_true",
        help="only: 4 KiB through the engine against MPI_Allreduce, and the idle CPU",
    )
    ap.add_argument(
        "--fusion",
        action="store_true",
        help="only: 100 x 40 KiB grouped and async against one 4000 KiB tensor",
    )
    args = parse_args(ap)
    if args.fusion:
        fusion_line()
        hvd.shutdown()
        return
    if args.latency:
        latency_and_idle()
        hvd.shutdown()
        return
    if args.cpu:
        cpu_share()
        hvd.shutdown()
        return
    sizes = [4 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB]
    if args.quick:
        sizes = sizes[:6]
    if args.sizes:
        sizes = parse_sizes(args.sizes)
    info = hvd.build_info()
    mpi_version = MPI.Get_library_version().replace(chr(0), "").splitlines()[0]
    say(f"# {N} ranks, float32 sum; {mpi_version}; engine cpu_operations={info['cpu_operations']}")
    ceiling = copy_bandwidth()
    say(
        "# ceiling: single-core copy bandwidth (rank 0, np.copyto 256 MiB, best of 5) = "
        f"{ceiling:.2f} GB/s"
    )
    rows = sweep(sizes, args.trials)
    if args.sweep_only:
        hvd.shutdown()
        return
    big = [r for r in rows if r[0] >= 16 * MIB]
    if big and RANK == 0:
        best_ring = max(busbw(r[0], r[2]) for r in big)
        say(f"# ring busbw / copy ceiling at >= 16 MiB: best {best_ring / ceiling:.2f}")
    med, p99 = small_latency()
    say(
        f"# 4 KiB allreduce through the engine: median {med * 1e6:.1f} us "
        f"(p99 {p99 * 1e6:.1f} us), "
        f"slowest rank's median"
    )
    fusion_line()
    hvd.shutdown()


def fusion_line():
    t_grouped, t_async, t_whole = fusion_case()
    say(
        f"# fusion: 100 x 40 KiB grouped_allreduce {t_grouped * 1e6:.0f} us, 100 x allreduce_async "
        f"{t_async * 1e6:.0f} us, one 4000 KiB tensor {t_whole * 1e6:.0f} us; "
        f"ratios {t_grouped / t_whole:.2f} (grouped) {t_async / t_whole:.2f} (async)"
    )


if __name__ == "__main__":
    main()
