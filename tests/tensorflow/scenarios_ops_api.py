"""Upstream's API beyond the core ops (issue 21): the topology ops, broadcast_ (in place),
grouped_reducescatter, alltoall's upstream return shape and divisibility rule, and the timeline
started and stopped at run time. Eager and in a tf.function, against NumPy references."""

import json
import os
import time

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import check, make, reference, rows_of
from tests.support.scenario import expect_error


def sc_topology_ops():
    """rank_op, size_op, local_rank_op, local_size_op, process_set_included_op: eager, and in a
    tf.function, where they are evaluated when it runs (stateful: never folded). A process set
    other than the global one fails when the op runs, naming it."""
    want = [hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), 1]

    def ops():
        return [
            hvd.rank_op(),
            hvd.size_op(),
            hvd.local_rank_op(),
            hvd.local_size_op(),
            hvd.process_set_included_op(),
        ]

    for what, got in (("eager", ops()), ("function", tf.function(ops)())):
        assert all(g.dtype == tf.int32 and g.shape == () for g in got), (what, got)
        assert [int(g) for g in got] == want, (what, [int(g) for g in got], want)
    named = hvd.rank_op(name="my_rank")
    assert int(named) == hvd.rank()
    graph = tf.function(lambda: hvd.size_op(name="sz")).get_concrete_function().graph
    assert [o.type for o in graph.get_operations() if o.name == "sz"] == ["HorovodSize"]
    for fn in (lambda: hvd.size_op(process_set_id=1), lambda: hvd.process_set_included_op(2)):
        expect_error(fn, tf.errors.InvalidArgumentError, "no process set with id")


def sc_broadcast_inplace():
    """broadcast_ assigns root_rank's values to the variables (every dtype kind, several shapes,
    one grouped op) and returns them, for every root, eager and in a tf.function; an empty
    list is returned as is; a variable on one rank only fails on every rank."""
    r, n = hvd.rank(), hvd.size()
    dts = (tf.float32, tf.int16, tf.bool, tf.float64)
    shapes = ((3,), (2, 2), (4,), ())
    inits = [make(r, shape, dt)[0] for dt, shape in zip(dts, shapes)]
    for root in range(n):
        want = [make(root, shape, dt)[1] for dt, shape in zip(dts, shapes)]
        vs = [tf.Variable(x) for x in inits]
        out = hvd.broadcast_(vs, root)
        for dt, v, o, w in zip(dts, vs, out, want):
            check(o, w, dt, f"broadcast_ eager root {root} returned")
            check(tf.convert_to_tensor(v), w, dt, f"broadcast_ eager root {root} variable")
        vs = [tf.Variable(x) for x in inits]
        traced = tf.function(lambda: hvd.broadcast_(vs, root, name=f"bi/{root}"))
        for call in range(2):
            for v, x in zip(vs, inits):  # each rank's own values again
                v.assign(x)
            out = traced()
            for dt, v, o, w in zip(dts, vs, out, want):
                check(o, w, dt, f"broadcast_ function {call} root {root} returned")
                check(tf.convert_to_tensor(v), w, dt, f"broadcast_ function {call} variable")
    assert hvd.broadcast_([], 0) == []
    extra = [tf.Variable([1.0])] if r == 1 else []
    expect_error(
        lambda: hvd.broadcast_([tf.Variable([2.0])] + extra, 0, name="bi/count"),
        tf.errors.FailedPreconditionError,
        "group sizes",
    )


def sc_grouped_reducescatter():
    """grouped_reducescatter of mixed dtypes and first dimensions (uneven rows) returns each
    rank's block of each in input order, Sum and Average (the default), with scale factors and
    compression, eager (named and unnamed) and in a tf.function; ranks passing a different
    number of tensors fail on every rank."""
    r, n = hvd.rank(), hvd.size()
    cases = [(tf.float32, (2 * n + 1, 3)), (tf.int16, (n, 2)), (tf.float64, (5,))]

    def block(full, rows):
        sizes = rows_of(rows, n)
        return full[sum(sizes[:r]) : sum(sizes[: r + 1])]

    for op in ("sum", "average"):
        xs = [make(r, shape, dt, op)[0] for dt, shape in cases]
        wants = [
            block(reference([make(q, shape, dt, op)[1] for q in range(n)], op, dt), shape[0])
            for dt, shape in cases
        ]
        hop = hvd.Sum if op == "sum" else hvd.Average
        # Arguments, not captures: unnamed ops in a graph are named after their input tensor,
        # whose name is stable across ranks only for the function's arguments.
        runs = {
            "eager": lambda ts: hvd.grouped_reducescatter(ts, op=hop),
            "named": lambda ts: hvd.grouped_reducescatter(ts, op=hop, name=f"grs/{op}"),
            "function": tf.function(lambda ts: hvd.grouped_reducescatter(ts, op=hop)),
        }
        for what, run in runs.items():
            for call in range(2):
                got = run(xs)
                for (dt, _), g, w in zip(cases, got, wants):
                    check(g, w, dt, f"grouped_reducescatter {what} {call} {op} {dt.name}")
    x = make(r, (2 * n, 2), tf.float32)[0]
    full = reference([make(q, (2 * n, 2), tf.float32)[1] for q in range(n)], "sum", tf.float32)
    got = hvd.grouped_reducescatter([x, x], op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    for g in got:
        check(g, block(full * 2.0, 2 * n), tf.float32, "grouped_reducescatter scaled")
    got = hvd.grouped_reducescatter([x], op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got[0].dtype == tf.float32
    assert np.allclose(got[0].numpy(), block(full, 2 * n), rtol=1e-2, atol=1e-2)
    assert hvd.grouped_reducescatter([]) == []
    xs = [x] * (3 if r == 1 else 2)
    expect_error(
        lambda: hvd.grouped_reducescatter(xs, name="grs/count"),
        tf.errors.FailedPreconditionError,
        "group sizes",
        "rank [1] has 3 tensors",
    )


def sc_alltoall_upstream():
    """Upstream's alltoall: without splits it returns the tensor alone (even splits), with
    splits the tensor and the received splits; a first dimension the number of ranks does not
    divide is tf.errors.InvalidArgumentError on every rank, eager and in a tf.function (also
    with a shape known only when it runs), naming the tensor, the rows and the rank count."""
    r, n = hvd.rank(), hvd.size()
    x = tf.constant(np.arange(2 * n) + 100 * r, tf.int32)
    want = np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * q for q in range(n)])
    got = hvd.alltoall(x, name="a2a/up")
    assert isinstance(got, tf.Tensor) and got.numpy().tolist() == want.tolist(), got
    got = tf.function(lambda t: hvd.alltoall(t))(x)
    assert isinstance(got, tf.Tensor) and got.numpy().tolist() == want.tolist(), got
    got, recv = hvd.alltoall(x, splits=[2] * n, name="a2a/up/splits")
    assert got.numpy().tolist() == want.tolist() and recv.numpy().tolist() == [2] * n
    odd = tf.ones([2 * n + 1, 2])
    needles = ("alltoall without splits needs a first dimension divisible", f"ranks ({n})")
    expect_error(
        lambda: hvd.alltoall(odd, name="a2a/odd"),
        tf.errors.InvalidArgumentError,
        "a2a/odd",
        f"got {2 * n + 1} rows",
        *needles,
    )
    dynamic = tf.function(
        lambda t: hvd.alltoall(t, name="a2a/odd/fn"),
        input_signature=[tf.TensorSpec([None, 2], tf.float32)],
    )
    expect_error(lambda: dynamic(odd), tf.errors.InvalidArgumentError, "a2a/odd/fn", *needles)
    # Divisible on every rank but one: every rank fails, naming that rank.
    rows = 2 * n + (1 if r == 1 else 0)
    expect_error(
        lambda: hvd.alltoall(tf.ones([rows]), name="a2a/odd/one"),
        tf.errors.InvalidArgumentError,
        "on rank 1",
        *needles,
    )
    assert (hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="a2a/after").numpy() == n).all()


def sc_timeline_runtime():
    """start_timeline/stop_timeline at run time (launched with HOROVOD_TIMELINE=DYNAMIC: no
    file until started): rank 0 writes a complete JSON file holding the ops between start and
    stop (and none after the next op), with CYCLE_START marks when asked; a second start
    writes a new file; other ranks write nothing; a stop without a timeline is a no-op; an
    unwritable path fails on rank 0 naming it."""
    r = hvd.rank()
    base = os.environ["HVD_TEST_TIMELINE_DIR"]
    first, second = os.path.join(base, "first.json"), os.path.join(base, f"second.{r}.json")
    hvd.stop_timeline()  # nothing to stop
    hvd.allreduce(tf.ones([2]), name="tl/before")
    hvd.start_timeline(first, mark_cycles=True)
    hvd.allreduce(tf.ones([2]), name="tl/during")
    tf.function(lambda: hvd.allgather(tf.ones([1]), name="tl/during/fn"))()
    hvd.stop_timeline()
    # Another rank's request for the next op can reach rank 0 before its stop took effect (as
    # upstream): tl/sync may be in the file, but not what follows it.
    hvd.allreduce(tf.ones([2]), name="tl/sync")
    hvd.allreduce(tf.ones([2]), name="tl/after")
    hvd.start_timeline(second)  # every rank passes its own path: only rank 0's is written
    hvd.broadcast(tf.ones([2]), 0, name="tl/second")
    hvd.stop_timeline()
    if r == 0:
        events = json.load(open(first))
        rows = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
        assert {"tl/during", "tl/during/fn"} <= rows, rows
        assert not rows & {"tl/before", "tl/after", "tl/second"}, rows
        assert any(e.get("name") == "CYCLE_START" for e in events), "no CYCLE_START"
        events = json.load(open(second))
        rows = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
        assert rows == {"tl/second"}, rows
        assert not any(e.get("name") == "CYCLE_START" for e in events)
        expect_error(
            lambda: hvd.start_timeline(os.path.join(base, "missing", "x.json")),
            ValueError,
            "cannot open",
            "missing",
        )
    else:
        time.sleep(0.2)
        assert not os.path.exists(second), second
        hvd.start_timeline(os.path.join(base, "missing", "x.json"))  # not rank 0: not opened
