"""Device arrays through horovod.numpy (horovod/common/device.py): `mpirun -np N python
tests/gpu/device_checks.py NAME[,NAME...] [ARGS]`, the protocol of tests/support/scenario.py.
tests/gpu and scripts/gpu_check.sh run these.

Without a GPU: `refused REASON` (CuPy-like and torch-like stand-ins, tests/support/fakelib.py, for
every collective: the engine's refusal on every rank) and `local_refusals` (what the frontend
refuses by itself, still on every rank). With GPUs (one per rank): `collectives` (every NCCL
collective on CuPy arrays or torch CUDA tensors, HVD_DEVICE_LIB picks; against NumPy; then
`odd_counts`: every collective and dtype at counts 1, 31, 4913 and 2^20 + 7, odd_counts.py),
`stall` (rank 1 never submits: the named error) and `bench` (allreduce against NCCL's own call
through the same library, same run).
"""

import os
import sys
import time

import numpy as np

import horovod.numpy as hvd
from tests.gpu import odd_counts
from tests.support import fakelib, scenario
from tests.support.scenario import expect_error

FAKES = (fakelib.CupyLike, fakelib.TorchLike)


def _ops(n):
    """(name, call) of every collective, for a device-array maker `mk`."""
    rows = 2 * n
    return [
        ("sum", lambda mk, t: hvd.allreduce(mk(np.ones(4, np.float32)), op=hvd.Sum, name=t)),
        ("avg", lambda mk, t: hvd.allreduce(mk(np.ones(4, np.float32)), name=t)),
        (
            "scaled",
            lambda mk, t: hvd.allreduce(
                mk(np.ones(4, np.float32)), op=hvd.Sum, prescale_factor=0.5, name=t
            ),
        ),
        ("max", lambda mk, t: hvd.allreduce(mk(np.ones(4, np.int32)), op=hvd.Max, name=t)),
        (
            "grouped",
            lambda mk, t: hvd.grouped_allreduce([mk(np.ones(3, np.float32))] * 3, name=t),
        ),
        ("gather", lambda mk, t: hvd.allgather(mk(np.ones((2, 2), np.float32)), name=t)),
        ("bcast", lambda mk, t: hvd.broadcast(mk(np.ones(4, np.float32)), 0, name=t)),
        ("a2a", lambda mk, t: hvd.alltoall(mk(np.ones((rows, 2), np.float32)), name=t)),
        ("rs", lambda mk, t: hvd.reducescatter(mk(np.ones((rows, 2), np.float32)), name=t)),
    ]


def sc_refused():
    """Every collective on each kind of stand-in fails on every rank with the engine's reason
    (argv[2]) for every rank, naming the tensor; the job goes on."""
    n = hvd.size()
    reason = sys.argv[2]
    for mk in FAKES:
        for op, call in _ops(n):
            t = f"dev/{mk.__name__}/{op}"
            shown = f"{t}.0" if op == "grouped" else t
            msg = expect_error(
                lambda: call(mk, t),
                ValueError,
                f"tensor '{shown}'",
                reason,
                *[f"on rank {q}:" for q in range(n)],
            )
            assert msg.count(reason) == n, msg
    assert hvd.allreduce(np.ones(2), op=hvd.Sum, name="dev/after")[0] == n


class _NoData(fakelib.CupyLike):
    """A CUDA Array Interface without its required 'data' entry."""

    @property
    def __cuda_array_interface__(self):
        d = dict(super().__cuda_array_interface__)
        del d["data"]
        return d


class _FailingProducer(fakelib.TorchLike):
    """A DLPack producer whose export fails (a library's own error, not a TypeError)."""

    def __dlpack__(self, stream=None, **kwargs):
        raise RuntimeError("the producer's export failed")


def sc_local_refusals():
    """Arguments the frontend refuses itself (on rank 0 only here) fail on every rank: rank 0
    with its own error, the others with the negotiated one naming rank 0."""
    r = hvd.rank()
    good = fakelib.CupyLike(np.ones((4, 4), np.float32))
    cases = [
        (
            "noncontig",
            fakelib.CupyLike(np.ones((4, 4), np.float32)[:, ::2], strides=(16, 8)),
            "not C-contiguous",
        ),
        (
            "noncontig_dl",
            fakelib.TorchLike(np.ones((4, 4), np.float32)[:, ::2], strides=(4, 2)),
            "not C-contiguous",
        ),
        ("complex", fakelib.CupyLike(np.ones(4, np.complex64)), "is not supported"),
        ("metal", fakelib.TorchLike(np.ones(4, np.float32), device_type=8), "Metal device"),
        ("mixed", None, "takes only device arrays"),
        ("no_data", _NoData(np.ones(4, np.float32)), "has no 'data' entry"),
        (
            "export_fails",
            _FailingProducer(np.ones(4, np.float32)),
            "__dlpack__() raised RuntimeError: the producer's export failed",
        ),
    ]
    for case, bad, needle in cases:
        name = f"dev/local/{case}"
        if case == "mixed":
            x = [good, np.ones(4, np.float32)] if r == 0 else [good, good]
            call = lambda x=x, name=name: hvd.grouped_allreduce(x, name=name)  # noqa: E731
        else:
            x = bad if r == 0 else good
            call = lambda x=x, name=name: hvd.allreduce(x, name=name)  # noqa: E731
        # A mixed call raises MixedDevicesError: a TypeError and, as upstream's torch raises, a
        # RuntimeError.
        if r == 0 and case == "mixed":
            expect_error(call, hvd.MixedDevicesError, needle)
            assert issubclass(hvd.MixedDevicesError, TypeError)
            assert issubclass(hvd.MixedDevicesError, RuntimeError)
        elif r == 0:
            expect_error(call, (TypeError, ValueError), needle)
        else:
            expect_error(call, ValueError, "on rank 0:", needle)


# ---- on a GPU: the real libraries -------------------------------------------------------------


class Lib:
    """CuPy or torch (HVD_DEVICE_LIB, else whichever imports), pinned to GPU local_rank.
    HVD_DEVICE_LIB=numpy: host arrays, to check the checks' own expectations without a GPU."""

    def __init__(self, device=None):
        want = os.environ.get("HVD_DEVICE_LIB", "")
        self.dev = hvd.local_rank() if device is None else device
        if want == "numpy":
            self.mod, self.name = np, "numpy"
            return
        order = [want] if want else ["cupy", "torch"]
        for name in order:
            try:
                self.mod = __import__(name)
                self.name = name
                break
            except ImportError:
                continue
        else:
            raise RuntimeError(f"neither of {order} is importable")
        if self.name == "cupy":
            self.mod.cuda.Device(self.dev).use()
        else:
            self.mod.cuda.set_device(self.dev)

    def to(self, a):
        if self.name == "numpy":
            return np.array(a)
        if self.name == "cupy":
            return self.mod.asarray(a)
        return self.mod.from_numpy(np.ascontiguousarray(a)).to(f"cuda:{self.dev}")

    def host(self, x):
        if self.name == "numpy":
            return x
        if self.name == "cupy":
            return self.mod.asnumpy(x)
        return x.cpu().numpy()

    def is_device(self, x):
        if self.name == "numpy":
            return isinstance(x, np.ndarray)
        if self.name == "cupy":
            return isinstance(x, self.mod.ndarray) and x.device.id == self.dev
        return isinstance(x, self.mod.Tensor) and x.is_cuda and x.device.index == self.dev

    def sync(self):
        if self.name == "numpy":
            return
        if self.name == "cupy":
            self.mod.cuda.Device(self.dev).synchronize()
        else:
            self.mod.cuda.synchronize(self.dev)


def _check(lib, what, out, want):
    assert lib.is_device(out), f"{what}: result is {type(out).__name__}, not on GPU {lib.dev}"
    got = lib.host(out)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-3), (
        f"{what}: got {got!r}, want {want!r}"
    )
    print(f"PASS {what} rank={hvd.rank()}", flush=True)


def sc_collectives():
    """Every NCCL collective on the device, against NumPy."""
    lib = Lib()
    r, n = hvd.rank(), hvd.size()
    tri = n * (n + 1) / 2
    for dt in (np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8, np.int8):
        x = lib.to(np.full(1000, r + 1, dt))
        out = hvd.allreduce(x, op=hvd.Sum, name=f"c.sum.{np.dtype(dt).name}")
        _check(lib, f"allreduce sum {np.dtype(dt).name}", out, np.full(1000, tri, dt))
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    for op, x, want in (
        (hvd.Average, base * (r + 1), base * tri / n),
        (hvd.Min, base * (r + 1), base),
        (hvd.Max, base * (r + 1), base * n),
        (hvd.Product, base, base**n),
    ):
        out = hvd.allreduce(lib.to(x), op=op, name=f"c.op.{op}")
        _check(lib, f"allreduce op {op}", out, want)
    out = hvd.allreduce(
        lib.to(np.full(7, r + 1, np.float32)),
        op=hvd.Sum,
        prescale_factor=0.5,
        postscale_factor=3.0,
        name="c.scaled",
    )
    _check(lib, "allreduce prescale/postscale", out, np.full(7, 1.5 * tri, np.float32))
    # Integers (staged through host memory): each share truncated, then the sum; as upstream.
    shares = sum(int((q + 1) * 0.5) for q in range(n))
    out = hvd.allreduce(
        lib.to(np.full(7, r + 1, np.int32)),
        op=hvd.Sum,
        prescale_factor=0.5,
        postscale_factor=3.0,
        name="c.iscaled",
    )
    _check(lib, "allreduce int32 prescale/postscale", out, np.full(7, 3 * shares, np.int32))
    out = hvd.reducescatter(
        lib.to(np.full((2 * n, 3), r + 1, np.int64)),
        op=hvd.Average,
        prescale_factor=0.5,
        name="c.rs.iscaled",
    )
    _check(lib, "reducescatter int64 Average prescale", out, np.full((2, 3), shares // n, np.int64))
    x = lib.to(np.full(5, r + 1, np.float32))
    out = hvd.allreduce(x, op=hvd.Sum, out=x, name="c.inplace")
    _check(lib, "allreduce in place (out=input)", out, np.full(5, tri, np.float32))
    outs = hvd.grouped_allreduce(
        [lib.to(np.full(100 + i, r, np.float32)) for i in range(8)], op=hvd.Sum, name="c.group"
    )
    for i, o in enumerate(outs):
        _check(
            lib,
            f"grouped allreduce member {i} (fused)",
            o,
            np.full(100 + i, n * (n - 1) / 2, np.float32),
        )
    out = hvd.allgather(lib.to(np.full((3, 2), r, np.float32)), name="c.gather.even")
    _check(
        lib,
        "allgather even",
        out,
        np.repeat(np.arange(n, dtype=np.float32), 3)[:, None] * np.ones((1, 2), np.float32),
    )
    out = hvd.allgather(lib.to(np.full((r + 1, 2), r, np.int32)), name="c.gather.uneven")
    _check(
        lib,
        "allgather uneven",
        out,
        np.concatenate([np.full((q + 1, 2), q, np.int32) for q in range(n)]),
    )
    for root in {0, n - 1}:
        out = hvd.broadcast(lib.to(np.full(6, r, np.float64)), root, name=f"c.bcast.{root}")
        _check(lib, f"broadcast root {root}", out, np.full(6, root, np.float64))
    out, splits = hvd.alltoall(lib.to(np.full((2 * n, 3), r, np.float32)), name="c.a2a.even")
    _check(
        lib,
        "alltoall even",
        out,
        np.repeat(np.arange(n, dtype=np.float32), 2)[:, None] * np.ones((1, 3), np.float32),
    )
    assert list(splits) == [2] * n, splits
    send = [q + 1 for q in range(n)]  # rank r sends q + 1 rows to rank q
    out, splits = hvd.alltoall(
        lib.to(np.full((sum(send), 2), r, np.float32)), splits=send, name="c.a2a.uneven"
    )
    _check(
        lib,
        "alltoall uneven",
        out,
        np.concatenate([np.full((r + 1, 2), q, np.float32) for q in range(n)]),
    )
    rows = 2 * n + 1
    full = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
    out = hvd.reducescatter(lib.to(full), op=hvd.Sum, name="c.rs")
    counts = [rows // n + (1 if q < rows % n else 0) for q in range(n)]
    start = sum(counts[:r])
    _check(lib, "reducescatter sum (uneven rows)", out, full[start : start + counts[r]] * n)
    out = hvd.reducescatter(lib.to(full), name="c.rs.avg")
    _check(lib, "reducescatter average", out, full[start : start + counts[r]])
    odd_counts.run(lib)


def sc_odd_counts():
    """Every collective and dtype at odd element counts (tests/gpu/odd_counts.py), alone."""
    odd_counts.run(Lib())


def sc_stall():
    """Rank 1 never submits: rank 0's device allreduce fails with the stall error naming the
    tensor and rank 1 (run with HOROVOD_STALL_CHECK_TIME_SECONDS / _SHUTDOWN_)."""
    lib = Lib()
    if hvd.rank() == 1:
        time.sleep(8)
    else:
        expect_error(
            lambda: hvd.allreduce(lib.to(np.ones(4, np.float32)), name="c.stall"),
            hvd.HorovodShutdownError,
            "c.stall",
            "[1]",
        )
    print(f"GOT STALL ERROR rank={hvd.rank()}", flush=True)
    if hvd.rank() != 1:
        time.sleep(8)
    os._exit(0)


def sc_shared_gpu():
    """Every rank on GPU 0 (a script that does not pin its GPU by local rank): the first device
    op fails on every rank with the ranks, the GPU and the remedy, nothing hangs, and the engine
    goes on (a host allreduce afterwards is right)."""
    lib = Lib(device=0)
    x = lib.to(np.ones(4, np.float32))
    ranks = ", ".join(str(r) for r in range(hvd.size() - 1)) + f" and {hvd.size() - 1}"
    msg = expect_error(
        lambda: hvd.allreduce(x, name="c.shared"),
        Exception,
        "c.shared",
        f"ranks {ranks} all use GPU",
        "hvd.local_rank()",
    )
    got = hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum, name="c.after")
    assert np.array_equal(got, np.full(3, hvd.size(), np.float32)), got
    print(f"GOT SHARED GPU ERROR rank={hvd.rank()}: {msg}", flush=True)


def _nccl_peer(lib):
    """NCCL's own allreduce (sum, float32) through the library: a function of (x, out)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if lib.name == "numpy":  # the flow without a GPU: MPI's allreduce stands in for NCCL's
        return "MPI (mpi4py)", lambda x, out: comm.Allreduce(x, out)
    if lib.name == "cupy":
        from cupy.cuda import nccl

        uid = comm.bcast(nccl.get_unique_id() if comm.rank == 0 else None, root=0)
        c = nccl.NcclCommunicator(comm.size, uid, comm.rank)
        stream = lib.mod.cuda.get_current_stream()

        def run(x, out):
            c.allReduce(
                x.data.ptr, out.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr
            )

        return "NCCL (cupy.cuda.nccl)", run
    import torch.distributed as dist

    port = comm.bcast(29500 + os.getpid() % 1000 if comm.rank == 0 else None, root=0)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=comm.rank,
        world_size=comm.size,
        device_id=lib.mod.device(f"cuda:{lib.dev}"),
    )

    if comm.size > 1:

        def run(x, out):  # in place on `out`: NCCL's in-place and out-of-place cost the same
            dist.all_reduce(out)

        return "NCCL (torch.distributed)", run

    # One rank: an in-place allreduce moves nothing (measured on an H100: 33 us for 1 GiB), while
    # Horovod's out-of-place one copies; the copy makes the two do the same work.
    def run_copy(x, out):
        out.copy_(x)
        dist.all_reduce(out)

    return "NCCL (torch.distributed, copy then in place)", run_copy


def sc_bench():
    """allreduce (sum, float32) from 4 KiB to 1 GiB: Horovod's device path against NCCL's own
    call through the same library, same run, one BENCH line per size (NCCL's calls queued back
    to back) and one BLOCKING line (each NCCL call waited for, as Horovod's call waits), then a
    summary line."""
    lib = Lib()
    peer_name, peer = _nccl_peer(lib)
    top = int(os.environ.get("HVD_BENCH_MAX_BYTES", 1 << 30))
    sizes = [(4 << 10) << (2 * k) for k in range(10) if (4 << 10) << (2 * k) <= top]  # 4K..1G
    for nbytes in sizes:
        x = lib.to(np.ones(nbytes // 4, np.float32))
        out = lib.to(np.zeros(nbytes // 4, np.float32))
        iters = 20 if nbytes <= (64 << 20) else 5

        def timed(fn):
            for _ in range(3):
                fn()
            lib.sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            lib.sync()
            return (time.perf_counter() - t0) / iters

        def peer_waited():
            peer(x, out)
            lib.sync()

        t_hvd = timed(lambda: hvd.allreduce(x, op=hvd.Sum, out=out, name=f"b.{nbytes}"))
        t_nccl = timed(lambda: peer(x, out))
        # Horovod's call returns once the result is there; NCCL's returns once it is queued, so
        # its loop above overlaps one call's launch with the previous call's work. The same
        # peer waited for after each call (what a blocking call costs) tells the two apart.
        t_waited = timed(peer_waited)
        ratio = t_hvd / t_nccl
        if hvd.rank() == 0:
            print(
                f"BENCH {nbytes} bytes: horovod {t_hvd * 1e6:.1f} us, {peer_name} "
                f"{t_nccl * 1e6:.1f} us, ratio {ratio:.2f}",
                flush=True,
            )
            print(
                f"BLOCKING {nbytes} bytes: horovod {t_hvd * 1e6:.1f} us, {peer_name} waited "
                f"for each call {t_waited * 1e6:.1f} us, ratio {t_hvd / t_waited:.2f}",
                flush=True,
            )
        largest = (nbytes, nbytes / t_hvd / 1e9, nbytes / t_nccl / 1e9, ratio)
    if hvd.rank() == 0:
        print(
            f"BENCH largest {largest[0]} bytes: algbw horovod {largest[1]:.2f} GB/s, "
            f"{peer_name} {largest[2]:.2f} GB/s, ratio {largest[3]:.2f}",
            flush=True,
        )


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
