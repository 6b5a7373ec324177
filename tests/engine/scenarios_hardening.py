"""Sizes from user input that overflow, zero-width rows, integer averages that must not wrap,
a long op that progresses, groups of many tensors (test_hardening.py)."""

import sys
import time

import numpy as np

import horovod.numpy as hvd
from tests.support.scenario import expect_error


def sc_size_overflow():
    """Sizes from user input that overflow int64 fail on every rank, naming tensor and rank;
    before, splits summing to 2**64 + 6 wrapped to 6 and corrupted the heap."""
    r, n = hvd.rank(), hvd.size()
    big = 2**63 - 1
    splits = [big, big] + [8] * (n - 2) if r == 0 else [6 // n + (q < 6 % n) for q in range(n)]
    expect_error(
        lambda: hvd.alltoall(np.arange(6.0), splits=splits, name="ovf/a2a"),
        ValueError,
        "ovf/a2a",
        "on rank 0",
        "split",
    )
    # Rows of zero bytes cost no memory, so first dimensions near 2**62 are legal inputs whose
    # totals overflow: every rank's allgather output, and rank 0's alltoall output.
    expect_error(
        lambda: hvd.allgather(np.empty((2**62, 0), np.uint8), name="ovf/ag"),
        ValueError,
        "ovf/ag",
        "int64",
    )
    x = 2**62 + 2**61
    expect_error(
        lambda: hvd.alltoall(
            np.empty((x, 0), np.uint8), splits=[x] + [0] * (n - 1), name="ovf/a2a-recv"
        ),
        ValueError,
        "ovf/a2a-recv",
        "output of rank 0",
        "int64",
    )
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
            got = hvd.allreduce(
                np.full(count, v, dt), op=hvd.Average, name=f"ia/{dt.__name__}/{v}/{count}"
            )
            assert got.dtype == dt and (got == v).all(), (dt, v, count, got[:4])
    # Ranks differ: values 250 - rank average to the truncated mean.
    got = hvd.allreduce(np.full(7, 250 - r, np.uint8), op=hvd.Average, name="ia/mixed")
    assert (got == int(sum(250 - q for q in range(n)) / n)).all(), got
    outs = hvd.grouped_allreduce(
        [np.full(3000 + i, 255, np.uint8) for i in range(4)], op=hvd.Average, name="ia/group"
    )
    assert all((o == 255).all() and o.dtype == np.uint8 for o in outs)
    got = hvd.reducescatter(np.full((2 * n, 3), 255, np.uint8), op=hvd.Average, name="ia/rs")
    assert got.shape == (2, 3) and (got == 255).all(), got


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
        outs = hvd.grouped_allreduce(
            [np.full(2, i % 100 + r, np.float32) for i in range(count)], op=hvd.Sum, name="many"
        )
        elapsed = time.perf_counter() - start
        for i in (0, count // 2, count - 1):
            assert (outs[i] == n * (i % 100) + n * (n - 1) / 2).all(), (i, outs[i])
        print(f"ELAPSED rank={r} step={step} {elapsed:.3f}")
