"""alltoall (explicit and default splits) and reducescatter: every dtype x 1-3 dims, eager and
in a tf.function."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import (
    MOVE_DTYPES,
    OPS,
    REDUCE_DTYPES,
    check,
    function,
    make,
    reference,
    rows_of,
)


def sc_alltoall():
    r, n = hvd.rank(), hvd.size()

    def splits_of(q):  # uneven, with zeros
        return [(q + d) % 3 for d in range(n)]

    def expected(tail, dt, splits_fn, rows_fn, salt=0):
        parts, recv = [], []
        for q in range(n):
            sq = splits_fn(q)
            xq = make(q, (rows_fn(q),) + tail, dt, salt=salt)[1]
            parts.append(xq[sum(sq[:r]) : sum(sq[: r + 1])])
            recv.append(sq[r])
        return np.concatenate(parts), recv

    cases = [(dt, tail) for dt in MOVE_DTYPES for tail in ((), (2,), (2, 3))]
    xs = [make(r, (sum(splits_of(r)),) + tail, dt)[0] for dt, tail in cases]
    wants = [expected(tail, dt, splits_of, lambda q: sum(splits_of(q))) for dt, tail in cases]

    def check_a2a(got, recv, want, dt, what):
        check(got, want[0], dt, what)
        assert recv.dtype == tf.int32 and recv.numpy().tolist() == want[1], (
            f"{what}: received splits {recv.numpy().tolist()} != {want[1]}"
        )

    for i, ((dt, tail), x) in enumerate(zip(cases, xs)):
        got, recv = hvd.alltoall(x, splits=splits_of(r), name=f"a2a/{i}" if i % 2 else None)
        check_a2a(got, recv, wants[i], dt, f"alltoall eager {dt.name} {tail}")

    @function
    def traced(ts, splits):
        return [hvd.alltoall(t, splits=splits) for t in ts]

    for call in range(2):
        for i, (got, recv) in enumerate(traced(xs, tf.constant(splits_of(r)))):
            check_a2a(got, recv, wants[i], cases[i][0], f"alltoall function {call} {cases[i]}")

    # Default splits: even, eager and traced; only the tensor comes back (upstream's shape).
    # A first dimension that does not divide fails: scenarios_ops_api.py.
    traced = function(lambda ts: [hvd.alltoall(t) for t in ts])
    total = 2 * n
    dts = (tf.float32, tf.bool, tf.int64, tf.int16)
    xs = [make(r, (total, 2), dt, salt=total)[0] for dt in dts]
    wants = [
        expected((2,), dt, lambda q: rows_of(total, n), lambda q: total, salt=total) for dt in dts
    ]
    for dt, x, want in zip(dts, xs, wants):
        check(hvd.alltoall(x), want[0], dt, f"alltoall default splits eager {dt.name}")
    for dt, got, want in zip(dts, traced(xs), wants):
        check(got, want[0], dt, f"alltoall default splits function {dt.name}")


def sc_reducescatter():
    r, n = hvd.rank(), hvd.size()
    cases = [
        (dt, shape, op)
        for dt in REDUCE_DTYPES
        for shape in ((2 * n + 1,), (5, 3), (7, 2, 2))
        for op in ("sum", "average")
    ]

    def block(full, shape):
        rows = rows_of(shape[0], n)
        return full[sum(rows[:r]) : sum(rows[: r + 1])]

    xs = [make(r, shape, dt, op)[0] for dt, shape, op in cases]
    wants = [
        block(reference([make(q, shape, dt, op)[1] for q in range(n)], op, dt), shape)
        for dt, shape, op in cases
    ]
    for i, ((dt, shape, op), x) in enumerate(zip(cases, xs)):
        got = hvd.reducescatter(x, op=OPS[op], name=f"rs/{i}" if i % 2 else None)
        check(got, wants[i], dt, f"reducescatter eager {dt.name} {shape} {op}")
    traced = function(lambda ts: [hvd.reducescatter(t, op=OPS[c[2]]) for t, c in zip(ts, cases)])
    for call in range(2):
        for i, got in enumerate(traced(xs)):
            check(got, wants[i], cases[i][0], f"reducescatter function {call} {cases[i]}")
    # Default op is Average; scale factors on floats.
    x, _ = make(r, (2 * n, 3), tf.float32)
    full = reference([make(q, (2 * n, 3), tf.float32)[1] for q in range(n)], "average", tf.float32)
    check(hvd.reducescatter(x), block(full, (2 * n,)), tf.float32, "reducescatter default op")
    full = (
        reference([make(q, (2 * n, 3), tf.float32)[1] * 0.5 for q in range(n)], "sum", tf.float32)
        * 3.0
    )
    check(
        hvd.reducescatter(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
        block(full, (2 * n,)),
        tf.float32,
        "reducescatter scaled",
    )
