"""Disagreements between ranks and bad arguments fail on every rank, named."""

import time

import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.scenario import expect_error


def _error_table(r, n):
    """(case, op kind, body(name for the op, name for its input), error, needles) of each
    disagreement and bad argument that sc_errors runs eagerly and in a tf.function."""
    odd = str([q for q in range(n) if q % 2])
    even = str([q for q in range(n) if q % 2 == 0])
    mismatch = tf.errors.FailedPreconditionError
    invalid = tf.errors.InvalidArgumentError
    f32_or_f64 = tf.float32 if r % 2 else tf.float64
    return [
        (
            "dtype",
            "Allreduce",
            lambda nm, i: hvd.allreduce(tf.ones([4], f32_or_f64, name=i), name=nm),
            mismatch,
            ("data types", even, odd, "float32", "float64"),
        ),
        (
            "shape",
            "Allreduce",
            lambda nm, i: hvd.allreduce(tf.ones([4 + r % 2], name=i), name=nm),
            mismatch,
            ("shapes", even, odd, "[4]", "[5]"),
        ),
        (
            "op",
            "Allreduce",
            lambda nm, i: hvd.allreduce(
                tf.ones([3], name=i), name=nm, op=hvd.Sum if r % 2 else hvd.Max
            ),
            mismatch,
            ("reduction operations", even, odd, "Sum", "Max"),
        ),
        (
            "root",
            "Broadcast",
            lambda nm, i: hvd.broadcast(tf.ones([3], name=i), r % 2, name=nm),
            mismatch,
            ("root", even, odd),
        ),
        (
            "gather",
            "Allgather",
            lambda nm, i: hvd.allgather(tf.ones([2, 2 + r % 2], name=i), name=nm),
            mismatch,
            ("first", even, odd),
        ),
        (
            "scale",
            "Allreduce",
            lambda nm, i: hvd.allreduce(tf.ones([2], name=i), name=nm, prescale_factor=1.0 + r % 2),
            mismatch,
            ("prescale", even, odd),
        ),
        (
            "rs",
            "Reducescatter",
            lambda nm, i: hvd.reducescatter(tf.ones([4, 1 + r % 2], name=i), name=nm),
            mismatch,
            ("shapes", even, odd),
        ),
        # One tensor of a group disagrees: the group's op fails on every rank.
        (
            "group",
            "Allreduce",
            lambda nm, i: hvd.grouped_allreduce(
                [tf.ones([2], name=i), tf.ones([3 + r % 2])], name=nm
            ),
            mismatch,
            ("shapes", even, odd),
        ),
        # A bad root on every rank, and on one rank only: InvalidArgument everywhere.
        (
            "badroot",
            "Broadcast",
            lambda nm, i: hvd.broadcast(tf.ones([2], name=i), n, name=nm),
            invalid,
            ("root rank", str(n)),
        ),
        (
            "badroot1",
            "Broadcast",
            lambda nm, i: hvd.broadcast(tf.ones([2], name=i), -1 if r == 1 else 0, name=nm),
            invalid,
            ("on rank 1", "-1"),
        ),
        # Alltoall splits that do not sum to the rows.
        (
            "splits",
            "Alltoall",
            lambda nm, i: hvd.alltoall(tf.ones([4], name=i), splits=[5] + [0] * (n - 1), name=nm),
            invalid,
            ("split",),
        ),
    ]


def sc_errors():
    """Disagreements fail on every rank with FailedPreconditionError naming the tensor and the
    ranks on each side, quickly; bad arguments with InvalidArgumentError; the next op works.
    Eagerly the tensor is named by us; in a tf.function by its node, Horovod<Op>_<input>."""
    r, n = hvd.rank(), hvd.size()
    odd = str([q for q in range(n) if q % 2])
    even = str([q for q in range(n) if q % 2 == 0])
    mismatch = tf.errors.FailedPreconditionError
    after = [0]

    def works():
        after[0] += 1
        got = hvd.allreduce(tf.ones([3]), op=hvd.Sum, name=f"after/{after[0]}")
        assert (got.numpy() == n).all()

    def expect(fn, exc, *needles):
        start = time.monotonic()
        msg = expect_error(fn, exc, *needles)
        elapsed = time.monotonic() - start
        assert elapsed < 10, f"{needles[0]}: took {elapsed:.1f} s"
        works()
        return msg

    table = _error_table(r, n)
    for mode in ("eager", "function"):
        for case, kind, body, exc, needles in table:
            if mode == "eager":
                key = f"mm/{case}"
                fn = (lambda b, k: lambda: b(k, None))(body, key)
            else:
                key = f"Horovod{kind}_lambda_0"  # the function's name, its first op
                fn = tf.function((lambda b, c: lambda: b(None, c))(body, case))
            expect(fn, exc, key, *needles)
    # Ops of different kinds under one name.
    expect(
        lambda: (hvd.allreduce if r % 2 else hvd.allgather)(tf.ones([3]), name="mm/kind"),
        mismatch,
        "mm/kind",
        "operations",
        "ALLREDUCE",
        "ALLGATHER",
        even,
        odd,
    )
    # Cached in a steady state, then one rank changes shape: named, on every rank.
    for _ in range(3):
        hvd.allreduce(tf.ones([6]), name="mm/cached")
    expect(
        lambda: hvd.allreduce(tf.ones([6 + (r == n - 1)]), name="mm/cached"),
        mismatch,
        "mm/cached",
        str([n - 1]),
        "[7]",
    )
    # The same with a tf.function called repeatedly, retraced on the last rank for a new shape.
    fn = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum))
    for _ in range(3):
        assert (fn(tf.ones([6])).numpy() == n).all()
    expect(
        lambda: fn(tf.ones([6 + (r == n - 1)])),
        mismatch,
        "HorovodAllreduce_lambda_0",
        str([n - 1]),
        "[7]",
    )
    # Adasum's refusals: scenarios_ops_adasum.py.
    works()


def sc_alltoall_splits():
    """Bad alltoall splits, and a scalar, fail with InvalidArgumentError on every rank, naming
    the tensor and showing the splits as given, within seconds, whether every rank or one
    passes them, eagerly and in a tf.function (also with splits as a traced argument); the next
    op works. Before, the splits were cast to int32 first: int64 splits wrapped (2**32 + 2 rows
    sent as 2: the op "worked"), floats were truncated (the error showed values never passed),
    a [1, n] tensor was read as n splits, and a scalar failed inside TensorFlow unnamed, on one
    rank while the others waited."""
    r, n = hvd.rank(), hvd.size()
    invalid = tf.errors.InvalidArgumentError
    x = tf.reshape(tf.range(8, dtype=tf.float32), [4, 2])
    good = [4 // n + (q < 4 % n) for q in range(n)]
    big = 2**32 + good[0]  # as int32: good[0]
    after = [0]

    def a2a(t, splits, k):
        return lambda: hvd.alltoall(t, splits=splits, name=k)

    def expect(fn, *needles):
        start = time.monotonic()
        msg = expect_error(fn, invalid, *needles)
        elapsed = time.monotonic() - start
        assert elapsed < 10, f"{needles[0]}: took {elapsed:.1f} s"
        after[0] += 1
        assert (
            hvd.allreduce(tf.ones([2]), op=hvd.Sum, name=f"a2a/after/{after[0]}").numpy() == n
        ).all()
        return msg

    cases = [  # (case, splits, needles)
        ("wrap", [big] + good[1:], (str(big), "int32")),
        ("wrap64", tf.constant([big] + good[1:], tf.int64), (str(big),)),
        ("float", [1.5, 2.5] + [0] * (n - 2), ("integers", "1.5", "2.5")),
        ("whole-float", tf.constant(good, tf.float64), ("integers", "double")),
        ("2d", tf.constant([good]), ("1-D", f"[1,{n}]")),
        ("neg", [-(2**40)] + good[1:], ("non-negative", str(-(2**40)))),
        ("huge", [2**64] + good[1:], ("not a tensor of integers",)),
        ("ragged", [[1], [1, 2]], ("not a tensor of integers",)),
        ("str", ["a"] * n, ("integers", "string")),
        ("count", good + [0], ("one non-negative split per rank", str(good + [0]))),
    ]
    for case, splits, needles in cases:
        for who in ("all", "one"):
            mine = splits if who == "all" or r == 1 else good
            where = "on rank 1" if who == "one" else "on rank 0"
            nm = f"a2a/{case}/{who}"
            expect(a2a(x, mine, nm), nm, where, *needles)
            expect(tf.function(a2a(x, mine, nm + "/fn")), nm + "/fn", where, *needles)
    # A scalar, with default and given splits, on every rank or one, eager and traced.
    one = tf.constant(1.0)
    for who in ("all", "one"):
        t, given = (one, [0] * n) if who == "all" or r == 1 else (x, good)
        for nm, splits in ((f"a2a/scalar/{who}", None), (f"a2a/scalar/{who}/splits", given)):
            expect(a2a(t, splits, nm), nm, "at least one dimension")
            expect(tf.function(a2a(t, splits, nm + "/fn")), nm + "/fn", "at least one dimension")
    # Splits known only when the function runs: checked by the kernel, on every rank.
    dyn = tf.function(lambda t, s: hvd.alltoall(t, splits=s, name="a2a/dyn"))
    for dt in (tf.int64, tf.int32):
        got, recv = dyn(x, tf.constant(good, dt))
        assert got.shape == (n * good[r], 2) and recv.dtype == tf.int32, recv
    bad = [big] + good[1:]
    expect(lambda: dyn(x, tf.constant(bad if r == 1 else good, tf.int64)), "on rank 1", str(big))
    bad = tf.constant([2.5] + good[1:], tf.float32) if r == 1 else tf.constant(good, tf.int64)
    expect(lambda: dyn(x, bad), "a2a/dyn", "on rank 1", "integers", "2.5")
    # Legal spellings: integer tensors of other dtypes, int64 lists that fit, default splits.
    for splits in (good, tf.constant(good, tf.uint8), tf.constant(good, tf.int64)):
        got, recv = hvd.alltoall(x, splits=splits, name="a2a/ok")
        assert recv.dtype == tf.int32 and recv.numpy().tolist() == [good[r]] * n, recv
    got = hvd.alltoall(tf.reshape(tf.range(2 * n, dtype=tf.float32), [n, 2]))  # even, alone
    assert got.shape == (n, 2), got
