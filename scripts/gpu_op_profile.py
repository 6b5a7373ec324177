"""Where a 4 KiB allreduce of a device array spends its time, on one rank and one GPU: the
same op on a host array, the CUDA calls the device path adds (an event, a stream sync, NCCL's
own allreduce), the frontend's description of a device array, then cProfile of 1000 device ops.
Run on a GPU machine with CuPy, with the engine built by `KEEP=1 scripts/gpu_check.sh`:
    PYTHONPATH=<its site>:$PWD mpirun -np 1 python3 scripts/gpu_op_profile.py
"""

import cProfile
import pstats
import sys
import time

import cupy as cp
import numpy as np
from cupy.cuda import nccl

import horovod.numpy as hvd
from horovod.common import device as hd

hvd.init()

cp.cuda.Device(hvd.local_rank()).use()
N = 1024  # 4 KiB float32


def med(fn, iters=2000, warm=100):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e6, ts[int(len(ts) * 0.9)] * 1e6


h = np.ones(N, np.float32)
ho = np.zeros(N, np.float32)
d = cp.ones(N, cp.float32)
do = cp.zeros(N, cp.float32)
res = {}
res["host allreduce 4K"] = med(lambda: hvd.allreduce(h, op=hvd.Sum, out=ho, name="h"))
res["device allreduce 4K"] = med(lambda: hvd.allreduce(d, op=hvd.Sum, out=do, name="d"))
res["device allreduce 4K (no out)"] = med(lambda: hvd.allreduce(d, op=hvd.Sum, name="d2"))
stream = cp.cuda.get_current_stream()
rt = cp.cuda.runtime


def ev():
    e = rt.eventCreateWithFlags(2)
    rt.eventRecord(e, stream.ptr)
    rt.eventDestroy(e)


try:
    res["event create+record+destroy"] = med(ev)
except Exception as e:
    print("PROFILE event failed", e)
res["stream sync (idle)"] = med(lambda: stream.synchronize())


def nc():
    c.allReduce(d.data.ptr, do.data.ptr, N, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
    stream.synchronize()


try:
    c = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    res["nccl allreduce 4K + sync"] = med(nc)
except Exception as e:
    print("PROFILE nccl failed", e)
res["cupy copy 4K + sync"] = med(lambda: (do.__setitem__(slice(None), d), stream.synchronize()))
res["describe(device)"] = med(lambda: hd.describe("x", d))
for k, (m, p90) in res.items():
    print(f"PROFILE {k}: median {m:.1f} us, p90 {p90:.1f} us", flush=True)

pr = cProfile.Profile()
pr.enable()
for _ in range(1000):
    hvd.allreduce(d, op=hvd.Sum, out=do, name="d")
pr.disable()
st = pstats.Stats(pr, stream=sys.stdout)
st.sort_stats("tottime").print_stats(12)
hvd.shutdown()
