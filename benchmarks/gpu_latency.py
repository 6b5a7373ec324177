"""Where a small GPU op's time goes at one rank: median wall time of hvd.allreduce (4 KiB,
float32, out= given) on a CuPy array and on a NumPy array through the same engine, and of a
CuPy device copy + synchronize (the work NCCL does at one rank), in one run.

    mpirun -np 1 python benchmarks/gpu_latency.py    (HOROVOD_TIMELINE=... for the spans:
    python benchmarks/timeline_spans.py <timeline> gpu4k cpu4k)

With --pieces, also the pieces the device path adds, each alone (median and 90th percentile):
an allreduce without `out`, a CUDA event made, recorded and destroyed, an idle stream's sync,
NCCL's own one-rank allreduce plus a sync, the frontend's description of a device array; then
cProfile of 1000 device allreduces (the Python side, and the binding's call as one line).
"""

import cProfile
import pstats
import sys

import cupy as cp
import numpy as np

import horovod.numpy as hvd
from horovod.common import device as device_arrays

hvd.init()
from runner import per_op_us  # noqa: E402  (after hvd.init: it imports mpi4py)

xg = cp.ones(1024, cp.float32)
yg = cp.empty_like(xg)
xh = np.ones(1024, np.float32)
yh = np.empty_like(xh)
cp.cuda.Device(0).synchronize()
g = per_op_us(lambda: hvd.allreduce(xg, op=hvd.Sum, out=yg, name="gpu4k"))
h = per_op_us(lambda: hvd.allreduce(xh, op=hvd.Sum, out=yh, name="cpu4k"))


def launch_only():
    yg[...] = xg  # a device copy, the work NCCL does at one rank
    cp.cuda.Device(0).synchronize()


k = per_op_us(launch_only)
print(
    f"GPULAT 4 KiB one rank: device array {g:.1f} us, host array {h:.1f} us, "
    f"cupy copy+sync {k:.1f} us",
    flush=True,
)


def pieces():
    stream = cp.cuda.get_current_stream()
    rt = cp.cuda.runtime

    def event():
        e = rt.eventCreateWithFlags(2)  # cudaEventDisableTiming, as the engine makes them
        rt.eventRecord(e, stream.ptr)
        rt.eventDestroy(e)

    from cupy.cuda import nccl

    comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)

    def nccl_allreduce():
        comm.allReduce(
            xg.data.ptr, yg.data.ptr, xg.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr
        )
        stream.synchronize()

    cases = {
        "device allreduce 4K (no out)": lambda: hvd.allreduce(xg, op=hvd.Sum, name="gpu4k.new"),
        "event create+record+destroy": event,
        "stream sync (idle)": stream.synchronize,
        "nccl allreduce 4K + sync": nccl_allreduce,
        "describe(device)": lambda: device_arrays.describe("x", xg),
    }
    for what, fn in cases.items():
        med, p90 = per_op_us(fn, warm=100), per_op_us(fn, warm=0, quantile=0.9)
        print(f"PROFILE {what}: median {med:.1f} us, p90 {p90:.1f} us", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(1000):
        hvd.allreduce(xg, op=hvd.Sum, out=yg, name="gpu4k")
    prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(12)


if "--pieces" in sys.argv:
    pieces()
hvd.shutdown()
