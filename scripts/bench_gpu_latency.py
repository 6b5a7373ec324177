"""Where a small GPU op's time goes at one rank: median wall time of hvd.allreduce (4 KiB,
float32, out= given) on a CuPy array and on a NumPy array through the same engine, and of a
CuPy device copy + synchronize (the work NCCL does at one rank), in one run.

    mpirun -np 1 python scripts/bench_gpu_latency.py    (HOROVOD_TIMELINE=... for the spans:
    python scripts/timeline_spans.py <timeline> gpu4k cpu4k)
"""

import statistics
import time

import cupy as cp
import numpy as np

import horovod.numpy as hvd

hvd.init()


def per_op(fn, n=2000):
    for _ in range(200):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


xg = cp.ones(1024, cp.float32)
yg = cp.empty_like(xg)
xh = np.ones(1024, np.float32)
yh = np.empty_like(xh)
cp.cuda.Device(0).synchronize()
g = per_op(lambda: hvd.allreduce(xg, op=hvd.Sum, out=yg, name="gpu4k"))
h = per_op(lambda: hvd.allreduce(xh, op=hvd.Sum, out=yh, name="cpu4k"))


def launch_only():
    yg[...] = xg  # a device copy, the work NCCL does at one rank
    cp.cuda.Device(0).synchronize()


k = per_op(launch_only)
print(
    f"GPULAT 4 KiB one rank: device array {g:.1f} us, host array {h:.1f} us, "
    f"cupy copy+sync {k:.1f} us",
    flush=True,
)
hvd.shutdown()
