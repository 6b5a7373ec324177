"""Scenarios run on every rank under mpirun by the engine tests (see conftest.launch).

Each scenario checks results against a NumPy reference that every rank can compute itself
(every rank regenerates all ranks' inputs from per-rank seeds), and prints
"OK <scenario> rank=<r>" when it passes. Any failed check raises, so the rank exits non-zero.
"""
import hashlib
import json
import os
import signal
import sys
import time

import numpy as np

import horovod.numpy as hvd

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # the tests' requirements install it; without it bfloat16 is not covered
    BF16 = None

DTYPES = [np.dtype(t) for t in ("uint8", "int8", "int32", "int64", "float16", "float32",
                                "float64")] + ([BF16] if BF16 is not None else [])
SHAPES = [(1,), (17,), (5, 3), (3, 2, 4), (100003,)]
OPS = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
       "product": hvd.Product}


def is_float(dt):
    return dt.kind == "f" or dt == BF16


def make(rank, shape, dt, op="sum", salt=0):
    """Deterministic input of `rank`, in a range where no reduction overflows."""
    rng = np.random.default_rng(1000 * rank + salt + 7)
    if op == "product":
        v = rng.choice([1, 2], size=shape) if not is_float(dt) else rng.uniform(0.8, 1.25, shape)
    elif dt.kind == "u":
        v = rng.integers(0, 40, size=shape)
    elif not is_float(dt):
        v = rng.integers(-20, 20, size=shape)
    else:
        v = rng.uniform(-2, 2, size=shape)
    return np.asarray(v).astype(dt)


def reference(arrays, op, dt):
    stack = np.stack([a.astype(np.float64) for a in arrays])
    n = len(arrays)
    if op == "sum":
        r = stack.sum(0)
    elif op == "average":
        r = stack.sum(0) / n
        if not is_float(dt):
            r = np.trunc(r)
    elif op == "min":
        r = stack.min(0)
    elif op == "max":
        r = stack.max(0)
    else:
        r = stack.prod(0)
    return r


def check(got, want, dt, what):
    assert got.dtype == dt, f"{what}: dtype {got.dtype} != {dt}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g = got.astype(np.float64)
    if is_float(dt):
        tol = {2: 3e-2, 4: 1e-5, 8: 1e-12}[dt.itemsize]
        ok = np.allclose(g, want, rtol=tol, atol=tol * 4)
    else:
        ok = np.array_equal(g, want.astype(dt).astype(np.float64))
    assert ok, f"{what}: max abs error {np.max(np.abs(g - want))}\n got {got.ravel()[:8]}\n want {want.ravel()[:8]}"


def sc_allreduce():
    r, n = hvd.rank(), hvd.size()
    cases = []
    for dt in DTYPES:
        for shape in SHAPES:
            for op in OPS:
                if op == "product" and int(np.prod(shape)) > 100 and not is_float(dt):
                    continue
                name = f"ar/{dt.name}/{'x'.join(map(str, shape))}/{op}"
                x = make(r, shape, dt, op)
                cases.append((name, dt, shape, op, hvd.allreduce_async(x, op=OPS[op], name=name)))
    # Scalars, in-place, and scale factors.
    scalar = hvd.allreduce(np.float64(r + 1), op=hvd.Sum, name="ar/scalar")
    check(np.asarray(scalar), np.asarray(n * (n + 1) / 2.0), np.dtype(np.float64), "scalar")
    inplace = np.full(1000, r + 1, np.int64)
    hvd.allreduce(inplace, op=hvd.Sum, name="ar/inplace", out=inplace)
    assert (inplace == n * (n + 1) // 2).all(), "in-place allreduce"
    # (33,): the direct exchange scales everything; (20001,): the ring scales each rank's own
    # segment before the allgather.
    for dt in [d for d in DTYPES if is_float(d)]:
        for shape in ((33,), (20001,)):
            x = make(r, shape, dt)
            got = hvd.allreduce(x, op=hvd.Average, name=f"ar/scale/{dt.name}/{shape[0]}",
                                prescale_factor=0.5, postscale_factor=3.0)
            want = reference([make(q, shape, dt).astype(np.float64) * 0.5 for q in range(n)],
                             "average", dt) * 3.0
            check(got, want, dt, f"scale {dt} {shape}")
    for name, dt, shape, op, h in cases:
        got = hvd.synchronize(h)
        check(got, reference([make(q, shape, dt, op) for q in range(n)], op, dt), dt, name)
    return len(cases)


def sc_allgather():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for tail in [(), (3,), (2, 4)]:
            rows = lambda q: (q + 1) if tail != (2, 4) else (0 if q == 1 else q + 2)  # noqa: E731
            x = make(r, (rows(r),) + tail, dt)
            got = hvd.allgather(x, name=f"ag/{dt.name}/{len(tail)}")
            want = np.concatenate([make(q, (rows(q),) + tail, dt) for q in range(n)])
            check(got, want.astype(np.float64), dt, f"allgather {dt} {tail}")


def sc_broadcast():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for shape in [(1,), (7, 3), (2, 3, 5), (300001,)]:
            for root in range(n):
                x = make(r, shape, dt)
                got = hvd.broadcast(x, root_rank=root, name=f"bc/{dt.name}/{len(shape)}/{root}")
                check(got, make(root, shape, dt).astype(np.float64), dt, f"broadcast root {root}")


def sc_alltoall():
    r, n = hvd.rank(), hvd.size()

    def splits_of(q):  # uneven, with a zero
        return [(q + d) % 3 for d in range(n)]

    for dt in DTYPES:
        for tail in [(), (2,), (2, 3)]:
            x = make(r, (sum(splits_of(r)),) + tail, dt)
            got, recv = hvd.alltoall(x, splits=splits_of(r), name=f"a2a/{dt.name}/{len(tail)}")
            parts = []
            for q in range(n):
                sq = splits_of(q)
                xq = make(q, (sum(sq),) + tail, dt)
                parts.append(xq[sum(sq[:r]):sum(sq[:r + 1])])
            assert list(recv) == [splits_of(q)[r] for q in range(n)], f"received splits {recv}"
            check(got, np.concatenate(parts).astype(np.float64), dt, f"alltoall {dt} {tail}")
    got, recv = hvd.alltoall(np.arange(2 * n, dtype=np.float32) + 100 * r, name="a2a/even")
    assert list(recv) == [2] * n


def sc_reducescatter():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for shape in [(n * 2 + 1,), (5, 3), (7, 2, 2)]:
            for op in ("sum", "average", "max"):
                x = make(r, shape, dt, op)
                got = hvd.reducescatter(x, op=OPS[op], name=f"rs/{dt.name}/{len(shape)}/{op}")
                full = reference([make(q, shape, dt, op) for q in range(n)], op, dt)
                rows = [shape[0] // n + (1 if q < shape[0] % n else 0) for q in range(n)]
                start = sum(rows[:r])
                check(got, full[start:start + rows[r]], dt, f"reducescatter {dt} {shape} {op}")


def sc_grouped():
    r, n = hvd.rank(), hvd.size()
    xs = [make(r, (i * 10 + 1,), np.dtype(np.float32), salt=i) for i in range(20)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grp")
    for i, got in enumerate(outs):
        want = reference([make(q, (i * 10 + 1,), np.dtype(np.float32), salt=i) for q in range(n)],
                         "sum", np.dtype(np.float32))
        check(got, want, np.dtype(np.float32), f"grouped {i}")
    # Large enough for the ring: fused through the fusion buffer, averaged and postscaled on
    # each rank's own segment.
    for dt in (np.dtype(np.float64), np.dtype(np.int32)):
        shapes = [(700 + 13 * i,) for i in range(12)]
        xs = [make(r, s, dt, salt=i) for i, s in enumerate(shapes)]
        outs = hvd.grouped_allreduce(xs, op=hvd.Average, name=f"grp/ring/{dt.name}",
                                     postscale_factor=2.0 if is_float(dt) else 1.0)
        for i, got in enumerate(outs):
            want = reference([make(q, shapes[i], dt, salt=i) for q in range(n)], "average", dt)
            check(got, want * (2.0 if is_float(dt) else 1.0), dt, f"grouped ring {dt} {i}")


def sc_order():
    """Ranks submit the same tensors in different orders; results must still match by name."""
    r, n = hvd.rank(), hvd.size()
    names = [f"ord/{i}" for i in range(30)]
    order = list(range(30))
    np.random.default_rng(r).shuffle(order)
    handles = {}
    for i in order:
        handles[i] = hvd.allreduce_async(np.full(64, i * (r + 1), np.int64), op=hvd.Sum,
                                         name=names[i])
        if i % 7 == r:
            time.sleep(0.002)
    for i in range(30):
        got = hvd.synchronize(handles[i])
        assert (got == i * n * (n + 1) // 2).all(), f"{names[i]}: {got[:3]}"


def sc_steady():
    """Same names every step (the cached fast path), then a legal shape change on all ranks."""
    r, n = hvd.rank(), hvd.size()
    for step in range(200):
        hs = [hvd.allreduce_async(np.full(8 + i, step + r, np.float64), op=hvd.Sum, name=f"w{i}")
              for i in range(5)]
        for h in hs:
            got = hvd.synchronize(h)
            assert (got == n * step + n * (n - 1) / 2).all(), f"step {step}: {got}"
    got = hvd.allreduce(np.ones(20), op=hvd.Sum, name="w0")  # new shape for a cached name
    assert (got == n).all()
    got = hvd.allreduce(np.ones(20, np.int32), op=hvd.Sum, name="w0")  # new dtype
    assert (got == n).all() and got.dtype == np.int32


def expect_error(fn, exc, *needles):
    try:
        fn()
    except exc as e:
        msg = str(e)
        for needle in needles:
            assert needle in msg, f"error {msg!r} lacks {needle!r}"
        return msg
    raise AssertionError(f"expected {exc.__name__} containing {needles}")


def sc_mismatch():
    r, n = hvd.rank(), hvd.size()
    odd = [q for q in range(n) if q % 2]
    even = [q for q in range(n) if q % 2 == 0]
    err = hvd.HorovodMismatchError
    expect_error(lambda: hvd.allreduce(np.ones(4, np.float32 if r % 2 else np.float64),
                                       name="mm/dtype"),
                 err, "mm/dtype", "data types", f"{even}", f"{odd}", "float32", "float64")
    expect_error(lambda: hvd.allreduce(np.ones(4 + r % 2), name="mm/shape"),
                 err, "mm/shape", "shapes", f"{odd}", "[5]", "[4]")
    expect_error(lambda: hvd.broadcast(np.ones(3), root_rank=r % 2, name="mm/root"),
                 err, "mm/root", "root", f"{odd}")
    expect_error(lambda: hvd.allreduce(np.ones(3), op=hvd.Sum if r % 2 else hvd.Max, name="mm/op"),
                 err, "mm/op", "reduction operations", "Sum", "Max")
    expect_error(lambda: (hvd.allreduce if r % 2 else hvd.allgather)(np.ones(3), name="mm/kind"),
                 err, "mm/kind", "operations", "ALLREDUCE", "ALLGATHER")
    expect_error(lambda: hvd.allgather(np.ones((2, 2 + r % 2)), name="mm/ag"),
                 err, "mm/ag", "first", f"{odd}")
    expect_error(lambda: hvd.allreduce(np.ones(2), prescale_factor=1.0 + r % 2, name="mm/scale"),
                 err, "mm/scale", "prescale")
    # Cached, then one rank changes shape: the cache entry is invalidated, the error is named.
    for _ in range(3):
        hvd.allreduce(np.ones(6), name="mm/cached")
    expect_error(lambda: hvd.allreduce(np.ones(6 + (r == n - 1)), name="mm/cached"),
                 err, "mm/cached", f"[{n - 1}]")
    # Local argument errors, before any negotiation.
    expect_error(lambda: hvd.broadcast(np.ones(2), root_rank=n, name="mm/badroot"), ValueError,
                 "mm/badroot", "root")
    expect_error(lambda: hvd.alltoall(np.ones(4), splits=[1] * (n + 1), name="mm/splits"),
                 ValueError, "mm/splits", "split")
    expect_error(lambda: hvd.allgather(np.float32(1), name="mm/scalar"), ValueError, "scalar")
    expect_error(lambda: hvd.allreduce(np.ones(2, np.complex64), name="mm/cplx"), ValueError,
                 "mm/cplx", "complex64")
    # A name only this rank has submitted stays in flight until the others submit it, which
    # they do only after the barrier-like allreduce that every rank joins after its check.
    mine = hvd.allreduce_async(np.ones(2), name=f"mm/dup/{r}")
    expect_error(lambda: hvd.allreduce_async(np.ones(2), name=f"mm/dup/{r}"), ValueError,
                 f"mm/dup/{r}", "already in flight")
    hvd.allreduce(np.ones(1), name="mm/dup/checked")
    others = [hvd.allreduce_async(np.ones(2), name=f"mm/dup/{q}") for q in range(n) if q != r]
    for h in [mine] + others:
        hvd.synchronize(h)
    # The engine keeps working after every error above.
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="mm/after") == n).all()


def sc_fusion_digest():
    """Prints a digest of many small fused/unfused results; the test compares two runs.

    Values are multiples of 1/8, so every float sum is exact whatever the order: with 3+ ranks
    the ring adds an element's contributions in an order that depends on its segment, which
    fusion shifts, so arbitrary floats could differ in the last bit (as with MPI or NCCL)."""
    r = hvd.rank()
    rng = np.random.default_rng(r)
    xs = [(rng.integers(-800, 800, 1000 + 37 * i) / 8).astype(np.float32) for i in range(40)]
    xs += [rng.integers(-1000, 1000, 333 + i).astype(np.int64) for i in range(5)]
    hs = [hvd.allreduce_async(x, op=hvd.Sum, name=f"fz/{i}") for i, x in enumerate(xs)]
    outs = [hvd.synchronize(h) for h in hs]
    outs += hvd.grouped_allreduce(xs, op=hvd.Average, name="fzg")
    digest = hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()
    print(f"DIGEST rank={r} {digest}")


def sc_timeline():
    r = hvd.rank()
    for step in range(3):
        hvd.grouped_allreduce([np.ones(100), np.ones(50)], op=hvd.Sum, name="tl")
        hvd.allreduce(np.ones(10), name="tl/single")
        hvd.allreduce(np.ones(100000), name="tl/big")  # above the direct-exchange size: ring
    hvd.broadcast(np.ones(4), root_rank=0, name="tl/bcast")
    if r == 0:
        time.sleep(0.3)


def sc_stall_warning():
    """Rank 1 submits late, first an uncached tensor and then a cached one."""
    r = hvd.rank()
    hvd.allreduce(np.ones(2), name="stall/cached")
    for name in ("stall/uncached", "stall/cached"):
        if r == 1:
            time.sleep(3.5)
        hvd.allreduce(np.ones(2), name=name)


def sc_stall_shutdown():
    r = hvd.rank()
    if r == 1:
        time.sleep(5)  # never submits 'stall/never' in time
        expect_error(lambda: hvd.allreduce(np.ones(2), name="stall/late"),
                     hvd.HorovodShutdownError, "stall")
    else:
        expect_error(lambda: hvd.allreduce(np.ones(2), name="stall/never"),
                     hvd.HorovodShutdownError, "stall/never", "[1]")


def sc_early_exit():
    """Rank 1 leaves early (sys.exit runs atexit -> shutdown); the others must get an error
    naming it instead of hanging."""
    r = hvd.rank()
    hvd.allreduce(np.ones(2), name="warmup")
    if r == 1:
        print(f"OK early_exit rank={r}", flush=True)
        sys.exit(0)
    expect_error(lambda: hvd.allreduce(np.ones(2), name="after-exit"), hvd.HorovodShutdownError,
                 "[1]", "shut")


def sc_killed():
    """Rank 1 dies without cleanup while rank 0 waits in an op."""
    r = hvd.rank()
    hvd.allreduce(np.ones(2), name="warmup")
    if r == 1:
        time.sleep(0.5)
        os._exit(17)
    hvd.allreduce(np.ones(2), name="never-completes")


def sc_stopped_rank():
    """Rank 1 is stopped (SIGSTOP) in the middle of a large ring allreduce. The others must
    report the blocked op naming rank 1 and, with a shutdown time set, end the job."""
    r = hvd.rank()
    x = np.ones(128 << 20, np.float32)  # 512 MiB: the ring runs for 70-150 ms here
    hvd.allreduce(x, op=hvd.Sum, name="stop/big", out=x)
    h = hvd.allreduce_async(x, op=hvd.Sum, name="stop/big", out=x)
    if r == 1:
        time.sleep(0.01)  # negotiated (cached) within microseconds; now inside the ring
        os.kill(os.getpid(), signal.SIGSTOP)
    hvd.synchronize(h)
    hvd.allreduce(np.ones(2), name="stop/after")  # had the stop missed the ring: blocks here


def sc_stopped_idle_rank():
    """Rank 1 is stopped between ops: the others block in a negotiation round, which the
    watchdog must report and, with a shutdown time set, turn into the end of the job."""
    hvd.allreduce(np.ones(2), name="idle/warmup")
    if hvd.rank() == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(0.5)
    hvd.allreduce(np.ones(2), name="idle/never")


def sc_topology():
    r, n = hvd.rank(), hvd.size()
    assert 0 <= r < n
    assert hvd.local_size() == n and hvd.local_rank() == r, "single node: local == global"
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert hvd.is_initialized() and hvd.mpi_built() and hvd.mpi_enabled()
    assert isinstance(hvd.mpi_threads_supported(), bool)
    assert hvd.nccl_built() == 0


def sc_subcomm():
    """init(comm=...) with an mpi4py communicator: even and odd world ranks form two jobs."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    sub = world.Split(world.rank % 2, world.rank)
    hvd.init(comm=sub)
    assert hvd.size() == sub.size and hvd.rank() == sub.rank
    got = hvd.allreduce(np.array([world.rank], np.int64), op=hvd.Sum, name="sub")
    assert got[0] == sum(q for q in range(world.size) if q % 2 == world.rank % 2)


def sc_size_overflow():
    """Sizes from user input that overflow int64 fail on every rank, naming tensor and rank;
    before, splits summing to 2**64 + 6 wrapped to 6 and corrupted the heap."""
    r, n = hvd.rank(), hvd.size()
    big = 2**63 - 1
    splits = [big, big] + [8] * (n - 2) if r == 0 else [6 // n + (q < 6 % n) for q in range(n)]
    expect_error(lambda: hvd.alltoall(np.arange(6.0), splits=splits, name="ovf/a2a"),
                 ValueError, "ovf/a2a", "on rank 0", "split")
    # Rows of zero bytes cost no memory, so first dimensions near 2**62 are legal inputs whose
    # totals overflow: every rank's allgather output, and rank 0's alltoall output.
    expect_error(lambda: hvd.allgather(np.empty((2**62, 0), np.uint8), name="ovf/ag"),
                 ValueError, "ovf/ag", "int64")
    x = 2**62 + 2**61
    expect_error(lambda: hvd.alltoall(np.empty((x, 0), np.uint8), splits=[x] + [0] * (n - 1),
                                      name="ovf/a2a-recv"),
                 ValueError, "ovf/a2a-recv", "output of rank 0", "int64")
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="ovf/after") == n).all()


def sc_zero_width():
    """Tensors of shape (rows, 0): outputs keep their row counts."""
    r, n = hvd.rank(), hvd.size()
    got, recv = hvd.alltoall(np.empty((2 * n, 0), np.float32), name="zw/a2a")
    assert got.shape == (2 * n, 0) and list(recv) == [2] * n, (got.shape, recv)
    got = hvd.reducescatter(np.empty((2 * n + 1, 0), np.float32), name="zw/rs")
    assert got.shape == (2 + (r == 0), 0), got.shape
    got = hvd.allgather(np.empty((r + 1, 0), np.int32), name="zw/ag")
    assert got.shape == (n * (n + 1) // 2, 0), got.shape


def sc_int_average():
    """Integer Average divides the true sum: uint8 200 + 200 + ... averages to 200, not to
    (sum mod 256) / n. Direct exchange, ring, fused group and reducescatter."""
    r, n = hvd.rank(), hvd.size()
    for dt, v in ((np.uint8, 200), (np.int8, -100), (np.int8, 100), (np.int32, 2**31 - 1)):
        for count in (5, 100003):
            got = hvd.allreduce(np.full(count, v, dt), op=hvd.Average, name=f"ia/{dt.__name__}/{v}/{count}")
            assert got.dtype == dt and (got == v).all(), (dt, v, count, got[:4])
    # Ranks differ: values 250 - rank average to the truncated mean.
    got = hvd.allreduce(np.full(7, 250 - r, np.uint8), op=hvd.Average, name="ia/mixed")
    assert (got == int(sum(250 - q for q in range(n)) / n)).all(), got
    outs = hvd.grouped_allreduce([np.full(3000 + i, 255, np.uint8) for i in range(4)],
                                 op=hvd.Average, name="ia/group")
    assert all((o == 255).all() and o.dtype == np.uint8 for o in outs)
    got = hvd.reducescatter(np.full((2 * n, 3), 255, np.uint8), op=hvd.Average, name="ia/rs")
    assert got.shape == (2, 3) and (got == 255).all(), got


def sc_reinit_other_comm():
    """init(comm=other) while running on another communicator raises; the same one is a no-op."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    hvd.init(comm=world)  # congruent with the running engine's: fine
    sub = world.Split(world.rank % 2, world.rank)
    expect_error(lambda: hvd.init(comm=sub), ValueError, "already running", "communicator")
    assert hvd.size() == world.size
    assert (hvd.allreduce(np.ones(2), op=hvd.Sum, name="reinit/after") == world.size).all()


def sc_config_error():
    """Init must fail on this rank with every needle (argv[2:]) in the message."""
    try:
        hvd.init()
    except ValueError as e:
        msg = str(e)
        for needle in sys.argv[2:]:
            assert needle in msg, f"{msg!r} lacks {needle!r}"
        print(f"CONFIG ERROR {msg}")
    else:
        raise AssertionError("init() accepted the configuration")
    assert not hvd.is_initialized()
    expect_error(lambda: hvd.init(), ValueError, "failed to initialize")


def sc_long_op_progressing():
    """One allreduce that runs for seconds but moves data all along (tiny ring chunks): the
    watchdog must not take it for a blocked one. Prints its duration for the test."""
    r, n = hvd.rank(), hvd.size()
    x = np.ones(int(sys.argv[2]), np.float32)
    start = time.perf_counter()
    got = hvd.allreduce(x, op=hvd.Sum, name="long/ring")
    elapsed = time.perf_counter() - start
    assert (got == n).all()
    print(f"ELAPSED rank={r} {elapsed:.3f}")


def sc_many_tensors():
    """A grouped allreduce of many small tensors, twice (uncached, then cached)."""
    r, n = hvd.rank(), hvd.size()
    count = int(sys.argv[2])
    for step in range(2):
        start = time.perf_counter()
        outs = hvd.grouped_allreduce([np.full(2, i % 100 + r, np.float32) for i in range(count)],
                                     op=hvd.Sum, name="many")
        elapsed = time.perf_counter() - start
        for i in (0, count // 2, count - 1):
            assert (outs[i] == n * (i % 100) + n * (n - 1) / 2).all(), (i, outs[i])
        print(f"ELAPSED rank={r} step={step} {elapsed:.3f}")


def sc_log_rank():
    """A warning logged during init (MPI below MPI_THREAD_SERIALIZED) carries the rank."""
    import mpi4py
    mpi4py.rc.thread_level = "single"
    from mpi4py import MPI  # noqa: F401  (initializes MPI at the single thread level)
    hvd.init()


def sc_gpu_claim():
    """Host memory enqueued as a GPU tensor (the engine's `device` argument): every rank fails
    with the engine's reason for each rank, and the job goes on. The reason, from argv[2], is the
    build's: no GPU operations (CPU build), no GPU visible (GPU build, no GPU), or not in the
    GPU's memory (GPU build on a GPU)."""
    from horovod import _core
    r, n = hvd.rank(), hvd.size()
    x = np.ones(4, np.float32)

    def submit():
        h = _core.enqueue(0, ["gpu/claim"], [x], None, int(hvd.Sum), 0, 1.0, 1.0, [], device=0)
        _core.wait(h, 60.0)

    msg = expect_error(submit, ValueError, "Invalid arguments for tensor 'gpu/claim'", sys.argv[2],
                       *[f"on rank {q}:" for q in range(n)])
    assert msg.count(sys.argv[2]) == n, msg
    assert hvd.allreduce(np.ones(2), op=hvd.Sum, name="gpu/after")[0] == n


SCENARIOS = {name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}
NO_INIT = {"subcomm", "config_error", "log_rank"}

if __name__ == "__main__":
    name = sys.argv[1]
    if name not in NO_INIT:
        hvd.init()
    SCENARIOS[name]()
    # init may have failed on purpose; a process without mpirun is rank 0
    rank = os.environ.get("OMPI_COMM_WORLD_RANK") or (hvd.rank() if hvd.is_initialized() else 0)
    print(f"OK {name} rank={rank}", flush=True)
    hvd.shutdown()
