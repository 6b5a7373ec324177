"""Dtypes (issue 17): bool is a dtype of its own, bool reductions are refused, integer scale
factors scale as upstream (issue 42), and a dtype no kernel takes fails every op on every rank,
named (test_ops.py)."""

import time

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.scenario import expect_error


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
    - integer scale factors scale as upstream's do (issue 42; issue 17 had refused them): in
      double, each rank's share truncated before the sum.
    - dtypes no kernel takes (string, complex64/128, uint32, uint64) fail with an error naming
      the op, the tensor, the dtype and the supported ones, on every rank, also when only one
      rank has the bad dtype. Before: TensorFlow's op-definition error naming neither Horovod
      nor the tensor, on the bad rank only, while the others waited."""
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

    _integer_scale_factors(r, n)
    _unsupported_dtypes(r, n)


def _integer_scale_factors(r, n):
    """sc_dtypes' integer scale factors."""
    # Integer scale factors, as upstream (issue 42, class 4): each factor in double, the product
    # truncated; the prescale on each rank's share before the sum.
    ints = tf.constant([3, 5], tf.int32) + r
    got = hvd.allreduce(ints, op=hvd.Sum, prescale_factor=0.5, name="dt/iscale")
    want = sum(np.trunc((np.array([3, 5]) + q) * 0.5) for q in range(n))
    assert got.dtype == tf.int32 and (got.numpy() == want).all(), (got, want)
    got = hvd.reducescatter(
        tf.ones([n, 2], tf.int64) * (r + 1), op=hvd.Sum, postscale_factor=2.5, name="dt/iscale/rs"
    )
    want = np.trunc(sum(q + 1 for q in range(n)) * 2.5)
    assert got.dtype == tf.int64 and (got.numpy() == want).all(), (got, want)
    got = hvd.allreduce(tf.fill([3], 2 * r + 1), op=hvd.Average, name="dt/iavg")
    assert got.dtype == tf.int32 and (got.numpy() == n).all(), got


def _unsupported_dtypes(r, n):
    """sc_dtypes' unsupported dtypes: refused on every rank, also on one rank only."""
    from tensorflow.python.framework import op_def_registry

    from horovod.tensorflow import mpi_ops

    invalid = tf.errors.InvalidArgumentError

    def bad(dtype):
        if dtype == tf.string:
            return tf.constant([b"a", b"bc"] * n)
        return tf.cast(tf.range(2 * n), dtype)

    ops = {
        "allreduce": lambda x, nm: hvd.allreduce(x, name=nm),
        "allgather": lambda x, nm: hvd.allgather(x, name=nm),
        "broadcast": lambda x, nm: hvd.broadcast(x, 0, name=nm),
        "alltoall": lambda x, nm: hvd.alltoall(x, name=nm),
        "reducescatter": lambda x, nm: hvd.reducescatter(x, name=nm),
        "grouped_allreduce": lambda x, nm: hvd.grouped_allreduce([x, x], name=nm)[0],
        "grouped_allgather": lambda x, nm: hvd.grouped_allgather([x], name=nm)[0],
    }
    for dtype in (tf.string, tf.complex64, tf.complex128, tf.uint32, tf.uint64):
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
            _quick(traced, invalid, f"Horovod{op.capitalize()}_lambda_0", *needles)

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
