"""Bad input fails with a named error on every rank; a lost, stopped or exiting rank never hangs
the others (test_errors.py, test_hardening.py)."""

import os
import signal
import sys
import time

import numpy as np

import horovod.numpy as hvd
from horovod.common import basics as _b
from tests.support.scenario import expect_error
from tests.support.stops import stop_once_the_ring_runs


def sc_mismatch():
    r, n = hvd.rank(), hvd.size()
    _negotiated_mismatches(r, n)
    _local_argument_errors(r, n)
    _in_flight_names(r, n)
    # The engine keeps working after every error above.
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="mm/after") == n).all()


def _negotiated_mismatches(r, n):
    """What the ranks disagree on, found in negotiation and named on every rank."""
    odd = [q for q in range(n) if q % 2]
    even = [q for q in range(n) if q % 2 == 0]
    err = hvd.HorovodMismatchError
    expect_error(
        lambda: hvd.allreduce(np.ones(4, np.float32 if r % 2 else np.float64), name="mm/dtype"),
        err,
        "mm/dtype",
        "data types",
        f"{even}",
        f"{odd}",
        "float32",
        "float64",
    )
    expect_error(
        lambda: hvd.allreduce(np.ones(4 + r % 2), name="mm/shape"),
        err,
        "mm/shape",
        "shapes",
        f"{odd}",
        "[5]",
        "[4]",
    )
    expect_error(
        lambda: hvd.broadcast(np.ones(3), root_rank=r % 2, name="mm/root"),
        err,
        "mm/root",
        "root",
        f"{odd}",
    )
    expect_error(
        lambda: hvd.allreduce(np.ones(3), op=hvd.Sum if r % 2 else hvd.Max, name="mm/op"),
        err,
        "mm/op",
        "reduction operations",
        "Sum",
        "Max",
    )
    expect_error(
        lambda: (hvd.allreduce if r % 2 else hvd.allgather)(np.ones(3), name="mm/kind"),
        err,
        "mm/kind",
        "operations",
        "ALLREDUCE",
        "ALLGATHER",
    )
    expect_error(
        lambda: hvd.allgather(np.ones((2, 2 + r % 2)), name="mm/ag"),
        err,
        "mm/ag",
        "first",
        f"{odd}",
    )
    expect_error(
        lambda: hvd.allreduce(np.ones(2), prescale_factor=1.0 + r % 2, name="mm/scale"),
        err,
        "mm/scale",
        "prescale",
    )
    # Cached, then one rank changes shape: the cache entry is invalidated, the error is named.
    for _ in range(3):
        hvd.allreduce(np.ones(6), name="mm/cached")
    expect_error(
        lambda: hvd.allreduce(np.ones(6 + (r == n - 1)), name="mm/cached"),
        err,
        "mm/cached",
        f"[{n - 1}]",
    )


def _local_argument_errors(r, n):
    """Local argument errors, before any negotiation."""
    expect_error(
        lambda: hvd.broadcast(np.ones(2), root_rank=n, name="mm/badroot"),
        ValueError,
        "mm/badroot",
        "root",
    )
    expect_error(
        lambda: hvd.alltoall(np.ones(4), splits=[1] * (n + 1), name="mm/splits"),
        ValueError,
        "mm/splits",
        "split",
    )
    # No splits and rows the ranks do not divide: refused on every rank (upstream's rule), here
    # when only the last rank's rows do not divide, naming it.
    expect_error(
        lambda: hvd.alltoall(np.ones(2 * n + (r == n - 1)), name="mm/a2a-odd"),
        ValueError,
        "mm/a2a-odd",
        f"on rank {n - 1}",
        f"divisible by the number of ranks ({n}), got {2 * n + 1} rows",
    )
    expect_error(lambda: hvd.allgather(np.float32(1), name="mm/scalar"), ValueError, "scalar")
    expect_error(
        lambda: hvd.allreduce(np.ones(2, np.complex64), name="mm/cplx"),
        ValueError,
        "mm/cplx",
        "complex64",
    )


def _in_flight_names(r, n):
    # A name only this rank has submitted stays in flight until the others submit it, which
    # they do only after the barrier-like allreduce that every rank joins after its check.
    mine = hvd.allreduce_async(np.ones(2), name=f"mm/dup/{r}")
    expect_error(
        lambda: hvd.allreduce_async(np.ones(2), name=f"mm/dup/{r}"),
        ValueError,
        f"mm/dup/{r}",
        "already in flight",
    )
    # Ops queued in one call are all or nothing: a call naming an op in flight, or one name
    # twice, is refused whole and leaves none of its ops behind (the names work afterwards).
    lib = _b._lib()
    expect_error(
        lambda: lib.enqueue(
            0, ["mm/new", f"mm/dup/{r}"], [np.ones(2)] * 2, None, 0, 0, 1.0, 1.0, []
        ),
        ValueError,
        f"mm/dup/{r}",
        "already in flight",
    )
    expect_error(
        lambda: lib.enqueue(0, ["mm/twice"] * 2, [np.ones(2)] * 2, None, 0, 0, 1.0, 1.0, []),
        ValueError,
        "mm/twice",
        "already in flight",
    )
    assert (hvd.allreduce(np.ones(2), op=hvd.Sum, name="mm/new") == n).all()
    assert (hvd.allreduce(np.ones(2), op=hvd.Sum, name="mm/twice") == n).all()
    hvd.allreduce(np.ones(1), name="mm/dup/checked")
    others = [hvd.allreduce_async(np.ones(2), name=f"mm/dup/{q}") for q in range(n) if q != r]
    for h in [mine] + others:
        hvd.synchronize(h)


def sc_alltoall_splits():
    """Bad alltoall splits, and a scalar, fail with a ValueError on every rank naming the tensor
    and showing the splits as given, within seconds, whether every rank or only rank 1 passes
    them; the engine goes on. Before, the splits the frontend could not read (floats, 2**64,
    strings, a scalar without splits) raised on that rank alone while the others waited, and a
    [1, n] array was read as n splits."""
    r, n = hvd.rank(), hvd.size()
    x = np.arange(8.0).reshape(4, 2)
    good = [4 // n + (q < 4 % n) for q in range(n)]
    cases = {  # case: (splits, needles)
        "float": ([1.5, 2.5] + [0] * (n - 2), ("integers", "1.5")),
        "npfloat": (np.array(good, np.float64), ("integers",)),
        "2d": (np.array([good]), ("1-D", f"[1, {n}]")),
        "2**64": ([2**64] + good[1:], ("does not fit in int64", str(2**64))),
        "str": (["a"] * n, ("integers", "'a'")),
        "ragged": ([[1], [1, 2]], ("integers", "[1]")),
        "neg": ([-(2**40)] + good[1:], ("non-negative", str(-(2**40)))),
        "count": (good + [0], ("one non-negative split per rank", str(good + [0]))),
    }
    for who in ("all", "one"):
        ranks = range(n) if who == "all" else [1]
        where = [f"on rank {q}:" for q in ranks]
        for case, (splits, needles) in cases.items():
            nm = f"a2a/{case}/{who}"
            mine = splits if r in ranks else good
            start = time.monotonic()
            expect_error(
                lambda: hvd.synchronize(hvd.alltoall_async(x, mine, nm), timeout=10),
                ValueError,
                f"Invalid arguments for tensor '{nm}'",
                *where,
                *needles,
            )
            assert time.monotonic() - start < 10, f"{nm}: {time.monotonic() - start:.1f} s"
        nm = f"a2a/scalar/{who}"
        expect_error(
            lambda: hvd.synchronize(
                hvd.alltoall_async(np.float64(1) if r in ranks else x, name=nm), timeout=10
            ),
            ValueError,
            f"Invalid arguments for tensor '{nm}'",
            *where,
            "at least one dimension",
        )
    got, recv = hvd.alltoall(x, np.array(good, np.uint64), name="a2a/ok")
    assert recv.tolist() == [good[r]] * n and got.shape == (n * good[r], 2), (got, recv)
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="a2a/after") == n).all()


def sc_early_exit():
    """Rank 1 leaves early (sys.exit runs atexit -> shutdown); the others must get an error
    naming it instead of hanging."""
    r = hvd.rank()
    hvd.allreduce(np.ones(2), name="warmup")
    if r == 1:
        print(f"OK early_exit rank={r}", flush=True)
        sys.exit(0)
    expect_error(
        lambda: hvd.allreduce(np.ones(2), name="after-exit"),
        hvd.HorovodShutdownError,
        "[1]",
        "shut",
    )


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
    r, n = hvd.rank(), hvd.size()
    x = np.ones(128 << 20, np.float32)  # 512 MiB: the ring runs for 70-150 ms here
    hvd.allreduce(x, op=hvd.Sum, name="stop/big", out=x)
    h = hvd.allreduce_async(x, op=hvd.Sum, name="stop/big", out=x)
    if r == 1:
        stop_once_the_ring_runs(x, n)
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


def sc_gpu_claim():
    """Host memory enqueued as a GPU tensor (the engine's `device` argument): every rank fails
    with the engine's reason for each rank, and the job goes on. The reason, from argv[2], is the
    build's: no GPU operations (CPU build), no GPU visible (GPU build, no GPU), or not in the
    GPU's memory (GPU build on a GPU)."""
    from horovod import _core

    n = hvd.size()
    x = np.ones(4, np.float32)

    def submit():
        h = _core.enqueue(0, ["gpu/claim"], [x], None, int(hvd.Sum), 0, 1.0, 1.0, [], device=0)
        _core.wait(h, 60.0)

    msg = expect_error(
        submit,
        ValueError,
        "Invalid arguments for tensor 'gpu/claim'",
        sys.argv[2],
        *[f"on rank {q}:" for q in range(n)],
    )
    assert msg.count(sys.argv[2]) == n, msg
    assert hvd.allreduce(np.ones(2), op=hvd.Sum, name="gpu/after")[0] == n


def sc_dtypes():
    """bool is a dtype of its own (issue 17, class 4): bool on one rank and uint8 on another is a
    dtype mismatch for every op, named on every rank; a bool reduction fails on every rank,
    named. Before, NumPy bool was refused on its rank only and the others waited. The same for
    a dtype the engine lacks on one rank only (complex64): that rank raises its own message,
    the others the negotiated one naming it."""
    r, n = hvd.rank(), hvd.size()
    x = np.ones(3, np.complex64 if r == 1 else np.float32)
    for op in ("allreduce", "allgather"):
        nm = f"dt/one/{op}"
        msg = expect_error(lambda: getattr(hvd, op)(x, name=nm), ValueError, nm, "complex64")
        if r == 1:  # unchanged: the text it raised before, without waiting
            assert msg.startswith(f"tensor '{nm}': input dtype complex64 is not supported"), msg
        else:
            assert f"Invalid arguments for tensor '{nm}' on rank 1: input dtype" in msg, msg
    mixed = np.ones(4, bool if r == 1 else np.uint8)
    others = [q for q in range(n) if q != 1]
    ops = {
        "allgather": lambda nm: hvd.allgather(mixed, name=nm),
        "broadcast": lambda nm: hvd.broadcast(mixed, 0, name=nm),
        "alltoall": lambda nm: hvd.alltoall(mixed, splits=[4] + [0] * (n - 1), name=nm),
        "allreduce": lambda nm: hvd.allreduce(mixed, op=hvd.Sum, name=nm),
    }
    for kind, fn in ops.items():
        expect_error(
            lambda: fn(f"bool/mixed/{kind}"),
            hvd.HorovodMismatchError,
            f"bool/mixed/{kind}",
            "data types",
            "[1] has bool",
            f"{others} ha",
            "uint8",
        )
    flags = np.array([True, False] * n)
    reductions = {
        "allreduce": lambda nm: hvd.allreduce(flags, op=hvd.Sum, name=nm),
        "average": lambda nm: hvd.allreduce(flags, name=nm),
        "async": lambda nm: hvd.synchronize(hvd.allreduce_async(flags, op=hvd.Max, name=nm)),
        "grouped": lambda nm: hvd.grouped_allreduce([np.ones(2), flags], name=nm),
        "reducescatter": lambda nm: hvd.reducescatter(flags, op=hvd.Sum, name=nm),
    }
    for kind, fn in reductions.items():
        what = "reducescatter" if kind == "reducescatter" else "allreduce"
        expect_error(
            lambda: fn(f"bool/reduce/{kind}"),
            ValueError,
            f"bool/reduce/{kind}",
            f"{what} of bool is not supported",
        )
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="bool/after") == n).all()


def _scaled(values, factor, dtype):
    """Upstream's integer scaling: the product in double, truncated toward zero."""
    return np.trunc(np.asarray(values, np.float64) * factor).astype(dtype)


def sc_int_scale():
    """Scale factors on integer dtypes do as upstream (issue 42, class 4; issue 17 had refused
    them): the prescale scales each rank's share in double and truncates it before the sum, the
    postscale scales the sum so, on every path (small, ring, fused group, reducescatter, Max);
    a product beyond the type's range saturates. Integer Average and float factors as before."""
    r, n = hvd.rank(), hvd.size()
    ranks = range(n)

    def x(q):
        return np.array([3, 5, -3], np.int32) + q

    got = hvd.allreduce(x(r), op=hvd.Sum, prescale_factor=0.5, name="iscale/pre")
    want = sum(_scaled(x(q), 0.5, np.int64) for q in ranks).astype(np.int32)
    assert got.dtype == np.int32 and (got == want).all(), (got, want)
    got = hvd.allreduce(x(r).astype(np.uint8) % 7, postscale_factor=2.5, name="iscale/post")
    total = sum(x(q).astype(np.uint8).astype(np.int64) % 7 for q in ranks)
    want = _scaled(total, 2.5, np.int64) // n  # Average: the postscaled sum, then / n
    assert got.dtype == np.uint8 and (got == want).all(), (got, want)
    got = hvd.allreduce(np.full(100003, r + 1, np.int64), prescale_factor=1.5, name="iscale/ring")
    want = sum(int((q + 1) * 1.5) for q in ranks) // n
    assert (got == want).all(), (got[:3], want)
    outs = hvd.grouped_allreduce(
        [x(r), x(r) * 2], op=hvd.Sum, postscale_factor=0.5, name="iscale/grouped"
    )
    for k, got in enumerate(outs):
        want = _scaled(sum(x(q) * (k + 1) for q in ranks), 0.5, np.int32)
        assert (got == want).all(), (k, got, want)
    got = hvd.reducescatter(
        np.full((n, 2), 3 + r, np.int8), op=hvd.Sum, prescale_factor=0.5, name="iscale/rs"
    )
    want = sum(int((3 + q) * 0.5) for q in ranks)
    assert got.shape == (1, 2) and (got == want).all(), (got, want)
    got = hvd.allreduce(
        np.array([100, -100], np.int8), op=hvd.Max, prescale_factor=2.0, name="iscale/sat"
    )
    assert got.tolist() == [127, -128], got
    got = hvd.allreduce(np.full(3, 2 * r + 1, np.int32), op=hvd.Average, name="iscale/avg")
    assert got.dtype == np.int32 and (got == n).all(), got
    got = hvd.allreduce(x(0).astype(np.float32), op=hvd.Sum, prescale_factor=0.5, name="iscale/f")
    assert (got == x(0) * 0.5 * n).all(), got
