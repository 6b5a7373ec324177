"""Disagreements between ranks and bad arguments fail on every rank, named; Adasum is refused."""

import time

import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.scenario import expect_error


def sc_errors():
    """Disagreements fail on every rank with FailedPreconditionError naming the tensor and the
    ranks on each side, quickly; bad arguments with InvalidArgumentError; the next op works.
    Eagerly the tensor is named by us; in a tf.function by its node, Horovod<Op>_<input>."""
    r, n = hvd.rank(), hvd.size()
    odd = str([q for q in range(n) if q % 2])
    even = str([q for q in range(n) if q % 2 == 0])
    mismatch = tf.errors.FailedPreconditionError
    invalid = tf.errors.InvalidArgumentError
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

    f32_or_f64 = tf.float32 if r % 2 else tf.float64
    # (case, op kind, body(name for the op, name for its input), error, needles)
    table = [
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
    for mode in ("eager", "function"):
        for case, kind, body, exc, needles in table:
            if mode == "eager":
                key = f"mm/{case}"
                fn = (lambda b, k: lambda: b(k, None))(body, key)
            else:
                key = f"Horovod{kind}_{case}_0"
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
        "HorovodAllreduce_t_0",
        str([n - 1]),
        "[7]",
    )
    # Unsupported: Adasum, on every entry point.
    expect_error(lambda: hvd.allreduce(tf.ones([2]), op=hvd.Adasum), NotImplementedError, "Adasum")
    expect_error(
        lambda: hvd.reducescatter(tf.ones([2]), op=hvd.Adasum), NotImplementedError, "Adasum"
    )
    expect_error(
        lambda: hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0), op=hvd.Adasum
        ),
        NotImplementedError,
        "Adasum",
    )
    v = tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * v)
    expect_error(
        lambda: hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [v]),
        NotImplementedError,
        "Adasum",
    )
    works()


def _quick(fn, exc, *needles):
    """expect_error within 10 s (a peer left waiting would take the launch's timeout); then the
    next op works."""
    start = time.monotonic()
    msg = expect_error(fn, exc, *needles)
    assert time.monotonic() - start < 10, f"{needles[0]}: took {time.monotonic() - start:.1f} s"
    n = hvd.size()
    assert (hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="dtypes/after").numpy() == n).all()
    return msg


def sc_dtypes():
    """Issue 17. Every check on every rank, eagerly (named and unnamed) and in a tf.function:
    - bool is its own dtype: bool on one rank and uint8 on the others is a mismatch naming both;
      bool reductions fail (InvalidArgumentError) naming the tensor. Before: bool travelled as
      uint8, so a uint8 broadcast into a bool tensor passed and left bytes that are not 0/1.
    - integer scale factors are refused, naming tensor, dtype and factors. Before: each rank's
      share was truncated before the sum.
    - dtypes no kernel takes (string, complex64/128, uint16, int16) fail with an error naming
      the op, the tensor, the dtype and the supported ones, on every rank, also when only one
      rank has the bad dtype. Before: TensorFlow's op-definition error naming neither Horovod
      nor the tensor, on the bad rank only, while the others waited."""
    from tensorflow.python.framework import op_def_registry

    from horovod.tensorflow import mpi_ops

    r, n = hvd.rank(), hvd.size()
    invalid, mismatch = tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError
    others = str([q for q in range(n) if q != 1])
    bits = [tf.constant([True, False, True]), tf.constant([1, 0, 1], tf.uint8)]
    moves = {
        "Allgather": lambda x, nm: hvd.allgather(x, name=nm),
        "Broadcast": lambda x, nm: hvd.broadcast(x, 0, name=nm),
        "Alltoall": lambda x, nm: hvd.alltoall(x, splits=[3] + [0] * (n - 1), name=nm)[0],
    }
    reduces = {
        "Allreduce": lambda x, nm: hvd.allreduce(x, op=hvd.Sum, name=nm),
        "Reducescatter": lambda x, nm: hvd.reducescatter(x, op=hvd.Sum, name=nm),
    }
    for kind, fn in moves.items():
        x = bits[0] if r == 1 else bits[1]
        _quick(
            lambda: fn(x, f"dt/mixed/{kind}"),
            mismatch,
            f"dt/mixed/{kind}",
            "data types",
            "[1] has bool",
            f"{others} ha",
            "uint8",
        )
        got = fn(bits[0], f"dt/bool/{kind}")  # bool itself still moves, as bool
        assert got.dtype == tf.bool, (kind, got.dtype)
    for kind, fn in reduces.items():
        _quick(lambda: fn(bits[0], f"dt/bool/{kind}"), invalid, f"dt/bool/{kind}", "bool")

    ints = tf.constant([3, 5], tf.int32)
    _quick(
        lambda: hvd.allreduce(ints, op=hvd.Sum, prescale_factor=0.5, name="dt/iscale"),
        invalid,
        "dt/iscale",
        "of int32 with prescale_factor 0.5",
    )
    _quick(
        lambda: hvd.reducescatter(
            tf.ones([n, 2], tf.int64), op=hvd.Sum, postscale_factor=2.0, name="dt/iscale/rs"
        ),
        invalid,
        "dt/iscale/rs",
        "of int64 with prescale_factor 1 and postscale_factor 2",
    )
    got = hvd.allreduce(tf.fill([3], 2 * r + 1), op=hvd.Average, name="dt/iavg")
    assert got.dtype == tf.int32 and (got.numpy() == n).all(), got

    def bad(dtype):
        if dtype == tf.string:
            return tf.constant([b"a", b"bc"] * n)
        return tf.cast(tf.range(2 * n), dtype)

    ops = {
        "allreduce": lambda x, nm: hvd.allreduce(x, name=nm),
        "allgather": lambda x, nm: hvd.allgather(x, name=nm),
        "broadcast": lambda x, nm: hvd.broadcast(x, 0, name=nm),
        "alltoall": lambda x, nm: hvd.alltoall(x, name=nm)[0],
        "reducescatter": lambda x, nm: hvd.reducescatter(x, name=nm),
        "grouped_allreduce": lambda x, nm: hvd.grouped_allreduce([x, x], name=nm)[0],
        "grouped_allgather": lambda x, nm: hvd.grouped_allgather([x], name=nm)[0],
    }
    for dtype in (tf.string, tf.complex64, tf.complex128, tf.uint16, tf.int16):
        for kind, fn in ops.items():
            op = kind.replace("grouped_", "")
            needles = (f"hvd.{op} does not support dtype {dtype.name}", "supported: ")
            x = bad(dtype)
            _quick(
                lambda: fn(x, f"dt/{dtype.name}/{kind}"),
                invalid,
                f"dt/{dtype.name}/{kind}",
                *needles,
                *[f"on rank {q}" for q in range(n)],
            )
            _quick(lambda: fn(x, None), invalid, *needles)  # unnamed: per-process counter names
            traced = tf.function(lambda: fn(tf.identity(x, name="dtin"), None))
            _quick(traced, invalid, f"Horovod{op.capitalize()}_dtin_0", *needles)

    # The bad dtype on one rank only: every rank fails, naming that rank; a valid op before it
    # in the same tf.function still runs everywhere. (Grouped ops unnamed: a named group's
    # tensors are named after their dtype, so ranks with different dtypes never match.)
    x = tf.constant([1 + 2j, 3j] * n, tf.complex64) if r == 1 else tf.ones([2 * n])
    for kind, fn in ops.items():
        op = kind.replace("grouped_", "")
        nm = None if kind.startswith("grouped_") else f"dt/one/{kind}"
        needles = ("on rank 1", f"hvd.{op} does not support dtype complex64")
        _quick(lambda: fn(x, nm), invalid, *([nm] if nm else []), *needles)

    @tf.function
    def one_rank_traced():
        before = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="dt/one/before")
        with tf.control_dependencies([before]):
            return hvd.allgather(tf.identity(x), name="dt/one/traced")

    _quick(one_rank_traced, invalid, "dt/one/traced", "on rank 1", "complex64")

    # The Python check's lists are the kernels' registered ones.
    for kind, (_, dtypes) in mpi_ops._KINDS.items():
        attr = [a for a in op_def_registry.get(f"Horovod{kind}").attr if a.name == "T"][0]
        assert set(attr.allowed_values.list.type) == {d.as_datatype_enum for d in dtypes}, kind
