"""Scenarios for horovod.tensorflow's ops, run on every rank under mpirun by test_ops.py.

Protocol (as tests/engine/scenarios.py): `python scenarios_ops.py NAME[,NAME...]` runs each
sc_NAME in order in one process per rank and prints "OK NAME rank=<r>" after each that passes;
the first failed check prints "FAIL NAME rank=<r>" with its traceback and ends the process
(see main). Every check is against a NumPy reference that each rank computes itself: all
ranks' inputs come from per-rank seeds, so every rank can regenerate every other rank's input.

Each op runs eagerly (some unnamed, so that per-process counter names are exercised, some
named) and inside a tf.function, where all of a scenario's ops live in one graph, run
concurrently and are matched across ranks by their node names.
"""
import os
import sys
import time
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402

tf.get_logger().setLevel("ERROR")  # retracing notices: scenarios build many small functions

REDUCE_DTYPES = [tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32,
                 tf.float64]
MOVE_DTYPES = [tf.bool] + REDUCE_DTYPES  # allgather, broadcast, alltoall also move bool
OPS = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
       "product": hvd.Product}
# 1-3 dims; the last is above the engine's direct-exchange size (32 KiB) for every dtype, so the
# ring runs on TF's buffers too.
SHAPES = [(17,), (3, 4), (2, 3, 2), (40, 30, 30)]


def function(fn):
    """tf.function without AutoGraph, for the big op matrices: AutoGraph's per-call handling
    of Horovod's Python wrappers costs ~10-20 ms per op while tracing, seconds over hundreds of
    ops. The other scenarios (steady, gradients, tape, ...) use plain tf.function, AutoGraph
    included."""
    return tf.function(fn, autograph=False)


def seed(*parts):
    return zlib.crc32(repr(parts).encode())


def make(rank, shape, dt, op="sum", salt=0):
    """(tensor, its exact values as float64) of `rank`: deterministic, in a range where no
    reduction overflows any dtype."""
    rng = np.random.default_rng(seed(rank, tuple(shape), dt.name, op, salt))
    if dt == tf.bool:
        v = rng.integers(0, 2, size=shape)
    elif op == "product":
        v = rng.choice([1, 2], size=shape) if dt.is_integer else rng.uniform(0.8, 1.25, shape)
    elif dt.is_unsigned:
        v = rng.integers(0, 40, size=shape)
    elif dt.is_integer:
        v = rng.integers(-20, 20, size=shape)
    else:
        v = rng.uniform(-2, 2, size=shape)
    t = tf.cast(tf.constant(v), dt)
    return t, tf.cast(t, tf.float64).numpy()


def reference(values, op, dt):
    """What reducing the ranks' exact values gives; integer Average truncates (as the engine)."""
    stack = np.stack(values)
    if op == "sum":
        return stack.sum(0)
    if op == "average":
        r = stack.sum(0) / len(values)
        return r if dt.is_floating else np.trunc(r)
    if op == "min":
        return stack.min(0)
    if op == "max":
        return stack.max(0)
    return stack.prod(0)


def check(got, want, dt, what):
    assert isinstance(got, tf.Tensor), f"{what}: got {type(got).__name__}"
    assert got.dtype == dt, f"{what}: dtype {got.dtype.name} != {dt.name}"
    want = np.asarray(want, np.float64)
    assert tuple(got.shape) == want.shape, f"{what}: shape {tuple(got.shape)} != {want.shape}"
    g = tf.cast(got, tf.float64).numpy()
    if dt.is_floating:
        tol = {2: 3e-2, 4: 1e-5, 8: 1e-12}[dt.size]
        ok = np.allclose(g, want, rtol=tol, atol=4 * tol)
    else:
        ok = np.array_equal(g, want)
    assert ok, (f"{what}: max abs error {np.max(np.abs(g - want)) if g.size else 0}\n"
                f" got {g.ravel()[:8]}\n want {want.ravel()[:8]}")


def rows_of(total, n):
    """Rows of each rank in reducescatter and default alltoall splits: the first ranks get one
    extra row when `total` does not divide evenly."""
    return [total // n + (1 if q < total % n else 0) for q in range(n)]


def expect_error(fn, exc, *needles):
    """fn() must raise `exc` whose message holds every needle; returns the message."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        for needle in needles:
            assert needle in msg, f"error {msg!r} lacks {needle!r}"
        return msg
    raise AssertionError(f"expected {exc.__name__} containing {needles}")


# ---- every op x dtype x 1-3 dims, eager and in a tf.function -----------------------------------

def sc_allreduce():
    r, n = hvd.rank(), hvd.size()
    cases = [(dt, shape, op) for dt in REDUCE_DTYPES for shape in SHAPES for op in OPS]
    inputs = [make(r, shape, dt, op) for dt, shape, op in cases]
    wants = [reference([make(q, shape, dt, op)[1] for q in range(n)], op, dt)
             for dt, shape, op in cases]
    # Scale factors (floats): each rank's input times prescale, reduced, times postscale.
    scaled = [(dt, shape, op) for dt in REDUCE_DTYPES if dt.is_floating
              for shape in ((17,), (40, 30, 30)) for op in ("sum", "average")]
    scaled_in = [make(r, shape, dt, salt=1) for dt, shape, op in scaled]
    scaled_want = [reference([make(q, shape, dt, salt=1)[1] * 0.5 for q in range(n)], op, dt) * 3.0
                   for dt, shape, op in scaled]

    def what(i, mode):
        dt, shape, op = cases[i]
        return f"allreduce {mode} {dt.name} {shape} {op}"

    for i, ((dt, shape, op), (x, exact)) in enumerate(zip(cases, inputs)):
        got = hvd.allreduce(x, op=OPS[op], name=f"ar/{i}" if i % 2 else None)
        check(got, wants[i], dt, what(i, "eager"))
        check(x, exact, dt, what(i, "eager input intact"))
    for (dt, shape, op), (x, _), want in zip(scaled, scaled_in, scaled_want):
        got = hvd.allreduce(x, op=OPS[op], prescale_factor=0.5, postscale_factor=3.0)
        check(got, want, dt, f"allreduce eager scaled {dt.name} {shape} {op}")
    # A temporary input (in a graph, an intermediate nothing else reads): the kernel may
    # forward its buffer to the output and reduce in place.
    in_graph = function(lambda t: hvd.allreduce(t + tf.zeros_like(t), op=hvd.Sum))
    for dt in (tf.float32, tf.int32):
        x, exact = make(r, (40, 30, 30), dt)
        want = reference([make(q, (40, 30, 30), dt)[1] for q in range(n)], "sum", dt)
        got = hvd.allreduce(x + tf.zeros_like(x), op=hvd.Sum, name=f"ar/forwarded/{dt.name}")
        check(got, want, dt, "allreduce eager temporary")
        check(in_graph(x), want, dt, "allreduce function temporary")
        check(x, exact, dt, "allreduce temporary: input intact")

    @function
    def reduce_all(xs, ys):
        plain = [hvd.allreduce(x, op=OPS[op]) for x, (_, _, op) in zip(xs, cases)]
        scaled_out = [hvd.allreduce(y, op=OPS[op], prescale_factor=0.5, postscale_factor=3.0)
                      for y, (_, _, op) in zip(ys, scaled)]
        return plain, scaled_out

    for call in range(2):  # the second call runs the same graph (same node names) again
        plain, scaled_out = reduce_all([x for x, _ in inputs], [y for y, _ in scaled_in])
        for i, got in enumerate(plain):
            check(got, wants[i], cases[i][0], what(i, f"function call {call}"))
        for (dt, shape, op), got, want in zip(scaled, scaled_out, scaled_want):
            check(got, want, dt, f"allreduce function scaled {dt.name} {shape} {op}")
    for i, (x, exact) in enumerate(inputs):
        check(x, exact, cases[i][0], what(i, "function input intact"))

    # Deprecated average= flag, as upstream.
    x, _ = make(r, (5,), tf.float32)
    sums = reference([make(q, (5,), tf.float32)[1] for q in range(n)], "sum", tf.float32)
    check(hvd.allreduce(x, average=False), sums, tf.float32, "average=False")
    check(hvd.allreduce(x, average=True), sums / n, tf.float32, "average=True")
    check(hvd.allreduce(x), sums / n, tf.float32, "default op is Average")

    # Dtypes outside the op's set fail locally, before any negotiation.
    for bad in (tf.constant([True, False]), tf.constant([1 + 2j], tf.complex64)):
        try:
            hvd.allreduce(bad)
        except (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as e:
            assert bad.dtype.name in str(e), e
        else:
            raise AssertionError(f"allreduce accepted {bad.dtype.name}")
    sc_grouped_allreduce()


def sc_grouped_allreduce():
    """grouped_allreduce of mixed dtypes and shapes: results in input order, eager and traced."""
    r, n = hvd.rank(), hvd.size()
    specs = [(tf.float32, (7,)), (tf.int32, (3, 2)), (tf.float32, (40, 30, 30)),
             (tf.float16, (2, 2, 2)), (tf.float64, (1,)), (tf.int32, (5,)), (tf.bfloat16, (9,))]
    for op in ("sum", "average", "max"):
        xs = [make(r, s, dt, op, salt=i)[0] for i, (dt, s) in enumerate(specs)]
        wants = [reference([make(q, s, dt, op, salt=i)[1] for q in range(n)], op, dt)
                 for i, (dt, s) in enumerate(specs)]
        eager = hvd.grouped_allreduce(xs, op=OPS[op], name=f"grouped/{op}")
        unnamed = hvd.grouped_allreduce(xs, op=OPS[op])
        traced = function(lambda ts: hvd.grouped_allreduce(ts, op=OPS[op]))(xs)
        for mode, outs in (("eager", eager), ("unnamed", unnamed), ("function", traced)):
            assert len(outs) == len(specs)
            for i, ((dt, s), got) in enumerate(zip(specs, outs)):
                check(got, wants[i], dt, f"grouped_allreduce {mode} {op} #{i}")


def sc_allgather():
    r, n = hvd.rank(), hvd.size()
    tails = [(), (3,), (2, 4)]

    def rows(q, tail):  # differing first dims; rank 1 has none for 3-d inputs
        return (0 if q == 1 else q + 2) if len(tail) == 2 else q + 1

    cases = [(dt, tail) for dt in MOVE_DTYPES for tail in tails]
    inputs = [make(r, (rows(r, tail),) + tail, dt)[0] for dt, tail in cases]
    wants = [np.concatenate([make(q, (rows(q, tail),) + tail, dt)[1] for q in range(n)])
             for dt, tail in cases]
    for i, ((dt, tail), x) in enumerate(zip(cases, inputs)):
        got = hvd.allgather(x, name=f"ag/{i}" if i % 2 else None)
        check(got, wants[i], dt, f"allgather eager {dt.name} {tail}")
    traced = function(lambda xs: [hvd.allgather(x) for x in xs])
    for call in range(2):
        for i, got in enumerate(traced(inputs)):
            check(got, wants[i], cases[i][0], f"allgather function {call} {cases[i]}")

    # grouped_allgather: mixed dtypes (one op per dtype), results in input order.
    specs = [(tf.float32, (3,)), (tf.bool, (2, 2)), (tf.int64, ()), (tf.float32, (2, 1, 2)),
             (tf.bfloat16, ())]
    xs = [make(r, (r + 1 + i % 2,) + s, dt, salt=i)[0] for i, (dt, s) in enumerate(specs)]
    wants = [np.concatenate([make(q, (q + 1 + i % 2,) + s, dt, salt=i)[1] for q in range(n)])
             for i, (dt, s) in enumerate(specs)]
    for mode, outs in (("eager", hvd.grouped_allgather(xs, name="gag")),
                       ("unnamed", hvd.grouped_allgather(xs)),
                       ("function", function(hvd.grouped_allgather)(xs))):
        for i, ((dt, s), got) in enumerate(zip(specs, outs)):
            check(got, wants[i], dt, f"grouped_allgather {mode} #{i}")


def sc_broadcast():
    r, n = hvd.rank(), hvd.size()
    cases = [(dt, shape, root) for dt in MOVE_DTYPES for shape in ((4,), (3, 2), (2, 2, 3))
             for root in range(n)]
    inputs = [make(r, shape, dt)[0] for dt, shape, root in cases]
    wants = [make(root, shape, dt)[1] for dt, shape, root in cases]
    for i, ((dt, shape, root), x) in enumerate(zip(cases, inputs)):
        got = hvd.broadcast(x, root_rank=root, name=f"bc/{i}" if i % 2 else None)
        check(got, wants[i], dt, f"broadcast eager {dt.name} {shape} root {root}")
    traced = function(lambda xs: [hvd.broadcast(x, c[2]) for x, c in zip(xs, cases)])
    for call in range(2):
        for i, got in enumerate(traced(inputs)):
            check(got, wants[i], cases[i][0], f"broadcast function {call} {cases[i]}")
    # Large, from the last rank, and a temporary input (its buffer may be forwarded).
    x, _ = make(r, (300001,), tf.float32)
    want = make(n - 1, (300001,), tf.float32)[1]
    check(hvd.broadcast(x * 1, root_rank=n - 1, name="bc/big"), want, tf.float32, "broadcast big")
    check(function(lambda t: hvd.broadcast(t * 1, n - 1))(x), want, tf.float32,
          "broadcast big function temporary")
    # root_rank may be a NumPy integer; a non-integer is a TypeError.
    check(hvd.broadcast(x[:3], np.int64(0)), make(0, (300001,), tf.float32)[1][:3], tf.float32,
          "numpy root")
    expect_error(lambda: hvd.broadcast(x, 0.5), TypeError, "root_rank")


def sc_alltoall():
    r, n = hvd.rank(), hvd.size()

    def splits_of(q):  # uneven, with zeros
        return [(q + d) % 3 for d in range(n)]

    def expected(tail, dt, splits_fn, rows_fn, salt=0):
        parts, recv = [], []
        for q in range(n):
            sq = splits_fn(q)
            xq = make(q, (rows_fn(q),) + tail, dt, salt=salt)[1]
            parts.append(xq[sum(sq[:r]):sum(sq[:r + 1])])
            recv.append(sq[r])
        return np.concatenate(parts), recv

    cases = [(dt, tail) for dt in MOVE_DTYPES for tail in ((), (2,), (2, 3))]
    xs = [make(r, (sum(splits_of(r)),) + tail, dt)[0] for dt, tail in cases]
    wants = [expected(tail, dt, splits_of, lambda q: sum(splits_of(q))) for dt, tail in cases]

    def check_a2a(got, recv, want, dt, what):
        check(got, want[0], dt, what)
        assert recv.dtype == tf.int32 and recv.numpy().tolist() == want[1], \
            f"{what}: received splits {recv.numpy().tolist()} != {want[1]}"

    for i, ((dt, tail), x) in enumerate(zip(cases, xs)):
        got, recv = hvd.alltoall(x, splits=splits_of(r), name=f"a2a/{i}" if i % 2 else None)
        check_a2a(got, recv, wants[i], dt, f"alltoall eager {dt.name} {tail}")

    @function
    def traced(ts, splits):
        return [hvd.alltoall(t, splits=splits) for t in ts]

    for call in range(2):
        for i, (got, recv) in enumerate(traced(xs, tf.constant(splits_of(r)))):
            check_a2a(got, recv, wants[i], cases[i][0], f"alltoall function {call} {cases[i]}")

    # Default splits: even, and uneven (the first ranks send one more row), eager and traced.
    traced = function(lambda ts: [hvd.alltoall(t) for t in ts])
    for total in (2 * n, 2 * n + 1):
        dts = (tf.float32, tf.bool, tf.int64)
        xs = [make(r, (total, 2), dt, salt=total)[0] for dt in dts]
        wants = [expected((2,), dt, lambda q: rows_of(total, n), lambda q: total, salt=total)
                 for dt in dts]
        for dt, x, want in zip(dts, xs, wants):
            got, recv = hvd.alltoall(x)
            check_a2a(got, recv, want, dt, f"alltoall default splits eager {total} {dt.name}")
        for dt, (got, recv), want in zip(dts, traced(xs), wants):
            check_a2a(got, recv, want, dt, f"alltoall default splits function {total} {dt.name}")


def sc_reducescatter():
    r, n = hvd.rank(), hvd.size()
    cases = [(dt, shape, op) for dt in REDUCE_DTYPES
             for shape in ((2 * n + 1,), (5, 3), (7, 2, 2)) for op in ("sum", "average")]

    def block(full, shape):
        rows = rows_of(shape[0], n)
        return full[sum(rows[:r]):sum(rows[:r + 1])]

    xs = [make(r, shape, dt, op)[0] for dt, shape, op in cases]
    wants = [block(reference([make(q, shape, dt, op)[1] for q in range(n)], op, dt), shape)
             for dt, shape, op in cases]
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
    full = reference([make(q, (2 * n, 3), tf.float32)[1] * 0.5 for q in range(n)], "sum",
                     tf.float32) * 3.0
    check(hvd.reducescatter(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
          block(full, (2 * n,)), tf.float32, "reducescatter scaled")


# ---- steady state: the same graph every step ----------------------------------------------------

def sc_steady():
    """A tf.function called many times: the same node names every step, so the engine's
    response cache serves every step after the first (the test reads the timeline to confirm).
    Results must stay right while the values change every step."""
    r, n = hvd.rank(), hvd.size()
    steps = 60  # test_ops.py knows this count and the input names below

    @tf.function
    def step(v):  # inputs named so that the test finds the ops in the timeline
        a = hvd.allreduce(tf.fill([8], v + r, name="steady_a"), op=hvd.Sum)
        b, c = hvd.grouped_allreduce([tf.fill([3, 2], v * (r + 1), name="steady_b"),
                                      tf.fill([5], v - r, name="steady_c")], op=hvd.Average)
        g = hvd.allgather(tf.fill([r + 1], v, name="steady_g"))
        s = hvd.broadcast(tf.fill([4], v + 10 * r, name="steady_s"), root_rank=n - 1)
        return a, b, c, g, s

    tri = n * (n - 1) / 2
    for i in range(steps):
        v = float(i)
        a, b, c, g, s = [t.numpy() for t in step(tf.constant(v, tf.float64))]
        assert (a == n * v + tri).all(), (i, a)
        assert np.allclose(b, v * (n + 1) / 2) and np.allclose(c, v - tri / n), (i, b, c)
        assert g.shape == (n * (n + 1) // 2,) and (g == v).all(), (i, g)
        assert (s == v + 10 * (n - 1)).all(), (i, s)
    assert step.experimental_get_tracing_count() == 1, "the step was retraced"
    # Eager ops with stable names take the cached path too.
    for i in range(steps // 2):
        got = hvd.allreduce(tf.constant([i, r], tf.int64), op=hvd.Sum, name="steady/eager")
        assert got.numpy().tolist() == [n * i, tri], (i, got)


# ---- gradients ----------------------------------------------------------------------------------
# Every rank q has its own objective on its output y_q of the op:
#     L_q(y_q) = sum(w_q * y_q**2 + c_q * y_q),  dL_q/dy_q = 2 w_q y_q + c_q,
# with w_q, c_q drawn from q's seed. What tape.gradient(L_r, x_r) returns on rank r is, by
# Horovod's (upstream's) definition, the gradient of a global objective F with respect to x_r:
#   - allreduce, reducescatter (each scaled by prescale * postscale, and 1/n for Average) and
#     alltoall:                  F = sum_q L_q        (the op's adjoint, as a sum over ranks)
#   - allgather, broadcast:      F = (1/n) sum_q L_q  (upstream averages these gradients)
# (the non-root ranks of a broadcast get zero: their input does not reach any output).
# Two references, both accounting for the other ranks' objectives:
#   - analytic: the formula per element, from every rank's x_q, w_q, c_q (regenerated locally);
#   - numeric: a central finite difference of F along a random direction d (each rank its own
#     d_r), computed with the real op on x +- eps d on all ranks at once and summed across
#     ranks, against sum_r <g_r, d_r>. F is quadratic, so the difference is exact up to
#     rounding, in float64.

def _loss_weights(q, shape, salt):
    rng = np.random.default_rng(seed("loss", q, tuple(shape), salt))
    return rng.uniform(0.5, 1.5, shape), rng.uniform(-1, 1, shape)


def _dloss(q, y, salt):
    w, c = _loss_weights(q, y.shape, salt)
    return 2 * w * y + c


def _x(q, shape, salt):
    return np.random.default_rng(seed("x", q, tuple(shape), salt)).uniform(-2, 2, shape)


def _global_sum(value):
    return float(hvd.allreduce(tf.reshape(tf.cast(value, tf.float64), [1]), op=hvd.Sum)[0])


def _check_gradient(what, op_fn, x_np, out_shape, salt, mean, want_grad, traced):
    r, n = hvd.rank(), hvd.size()
    w, c = _loss_weights(r, out_shape, salt)

    def loss_fn(x):
        y = op_fn(x)
        return tf.reduce_sum(w * y * y + c * y)

    def grad_fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_fn(x)
        return tape.gradient(loss, x)

    if traced:
        loss_fn, grad_fn = tf.function(loss_fn), tf.function(grad_fn)
    x = tf.constant(x_np, tf.float64)
    g = grad_fn(x)
    assert g is not None and g.dtype == tf.float64 and tuple(g.shape) == x_np.shape, (what, g)
    assert np.allclose(g.numpy(), want_grad, rtol=1e-10, atol=1e-10), \
        f"{what}: gradient {g.numpy().ravel()[:6]} != analytic {np.ravel(want_grad)[:6]}"
    d = np.random.default_rng(seed("direction", r, salt)).normal(size=x_np.shape)
    eps = 1e-3
    plus = _global_sum(loss_fn(tf.constant(x_np + eps * d)))
    minus = _global_sum(loss_fn(tf.constant(x_np - eps * d)))
    numeric = (plus - minus) / (2 * eps) / (n if mean else 1)
    analytic = _global_sum(np.sum(g.numpy() * d))
    assert abs(numeric - analytic) <= 1e-7 * (1 + abs(analytic)), \
        f"{what}: finite difference {numeric} != sum_r <g_r, d_r> {analytic}"


def sc_gradients():
    r, n = hvd.rank(), hvd.size()
    for traced in (False, True):
        mode = "function" if traced else "eager"
        # allreduce: y = s * sum_p x_p on every rank; g_r = s * sum_q dL_q/dy.
        shape = (3, 4)
        xs = [_x(q, shape, 0) for q in range(n)]
        for op, pre, post in ((hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0),
                              (hvd.Average, 0.5, 3.0), (hvd.Sum, 2.0, 0.25)):
            s = pre * post / (n if op == hvd.Average else 1)
            y = s * sum(xs)
            want = s * sum(_dloss(q, y, 1) for q in range(n))
            _check_gradient(f"allreduce {mode} op={op} pre={pre} post={post}",
                            lambda x: hvd.allreduce(x, op=op, prescale_factor=pre,
                                                    postscale_factor=post),
                            xs[r], shape, 1, False, want, traced)
        # grouped_allreduce: each output's gradient as above; an unused output gets zeros.
        a = [_x(q, (4,), 2) for q in range(n)]
        b = [_x(q, (2, 3), 3) for q in range(n)]
        ya, yb = sum(a), sum(b)
        wa, ca = _loss_weights(r, (4,), 2)
        wb, cb = _loss_weights(r, (2, 3), 3)

        def grouped_grads(ta, tb, use_b):
            with tf.GradientTape() as tape:
                tape.watch([ta, tb])
                oa, ob = hvd.grouped_allreduce([ta, tb], op=hvd.Sum)
                loss = tf.reduce_sum(wa * oa * oa + ca * oa)
                if use_b:
                    loss += tf.reduce_sum(wb * ob * ob + cb * ob)
            return tape.gradient(loss, [ta, tb], unconnected_gradients="zero")

        fn = tf.function(grouped_grads) if traced else grouped_grads
        for use_b in (True, False):
            ga, gb = fn(tf.constant(a[r]), tf.constant(b[r]), use_b)
            want_a = sum(_dloss(q, ya, 2) for q in range(n))
            want_b = sum(_dloss(q, yb, 3) for q in range(n)) if use_b else np.zeros((2, 3))
            assert np.allclose(ga.numpy(), want_a) and np.allclose(gb.numpy(), want_b), \
                f"grouped_allreduce gradient {mode} use_b={use_b}: {ga}, {gb}"

        # allgather: y = concat_p x_p (rank 1 has no rows, rank p != 1 has p+1);
        # g_r = mean_q dL_q/dy, r's rows.
        rows = [0 if q == 1 else q + 1 for q in range(n)]
        xs = [_x(q, (rows[q], 3), 4) for q in range(n)]
        y = np.concatenate(xs)
        start = sum(rows[:r])
        want = (sum(_dloss(q, y, 5) for q in range(n)) / n)[start:start + rows[r]]
        _check_gradient(f"allgather {mode}", hvd.allgather, xs[r], y.shape, 5, True, want, traced)

        # broadcast: y = x_root; g_root = mean_q dL_q/dy, zero elsewhere.
        xs = [_x(q, (2, 3), 6) for q in range(n)]
        for root in sorted({0, n - 1}):
            y = xs[root]
            want = sum(_dloss(q, y, 7) for q in range(n)) / n if r == root else np.zeros((2, 3))
            _check_gradient(f"broadcast {mode} root {root}",
                            lambda x: hvd.broadcast(x, root_rank=root), xs[r], (2, 3), 7, True,
                            want, traced)

        # alltoall: rank p sends splits_p[q] rows to q; y_q = concat_p (p's rows for q);
        # g_r = concat_q (the rows of dL_q/dy_q that came from r).
        def splits_of(q):
            return [(q + d) % 3 for d in range(n)]

        xs = [_x(q, (sum(splits_of(q)), 2), 8) for q in range(n)]

        def received(q):
            return np.concatenate([xs[p][sum(splits_of(p)[:q]):sum(splits_of(p)[:q + 1])]
                                   for p in range(n)])

        back = []
        for q in range(n):
            dq = _dloss(q, received(q), 9)
            offset = sum(splits_of(p)[q] for p in range(r))
            back.append(dq[offset:offset + splits_of(r)[q]])
        _check_gradient(f"alltoall {mode}", lambda x: hvd.alltoall(x, splits=splits_of(r))[0],
                        xs[r], received(r).shape, 9, False, np.concatenate(back), traced)

        # reducescatter: y_q = s * (sum_p x_p)[q's rows]; g_r = s * concat_q dL_q/dy_q.
        shape = (2 * n + 1, 2)
        xs = [_x(q, shape, 10) for q in range(n)]
        rows = rows_of(shape[0], n)
        for op in (hvd.Sum, hvd.Average):
            s = 1.0 / n if op == hvd.Average else 1.0
            full = s * sum(xs)
            blocks = [full[sum(rows[:q]):sum(rows[:q + 1])] for q in range(n)]
            want = s * np.concatenate([_dloss(q, blocks[q], 11) for q in range(n)])
            _check_gradient(f"reducescatter {mode} op={op}",
                            lambda x: hvd.reducescatter(x, op=op), xs[r], blocks[r].shape, 11,
                            False, want, traced)


# ---- compression, sparse, variables and objects -------------------------------------------------

def sc_extras():
    r, n = hvd.rank(), hvd.size()
    # fp16 compression: floats travel as float16 and come back in their dtype.
    x = tf.fill([6], tf.constant(1.0 + 2.0 ** -13, tf.float32))  # not representable in float16
    exact = hvd.allreduce(x, op=hvd.Sum, name="fp16/none")
    squeezed = hvd.allreduce(x, op=hvd.Sum, name="fp16/on", compression=hvd.Compression.fp16)
    assert exact.dtype == squeezed.dtype == tf.float32
    assert (exact.numpy() == np.float32(n * (1.0 + 2.0 ** -13))).all(), exact
    assert (squeezed.numpy() == n).all(), f"fp16 compression did not round: {squeezed}"
    specs = [(tf.float32, (40, 30, 30)), (tf.float64, (7,)), (tf.int32, (5,)), (tf.float16, (3,))]
    xs = [make(r, s, dt, salt=i)[0] for i, (dt, s) in enumerate(specs)]
    wants = [reference([make(q, s, dt, salt=i)[1] for q in range(n)], "average", dt)
             for i, (dt, s) in enumerate(specs)]
    grouped = hvd.grouped_allreduce(xs, compression=hvd.Compression.fp16)
    traced = tf.function(lambda ts: hvd.grouped_allreduce(ts, compression=hvd.Compression.fp16))(xs)
    singles = [hvd.allreduce(t, compression=hvd.Compression.fp16) for t in xs]
    for mode, outs in (("grouped", grouped), ("function", traced), ("single", singles)):
        for i, ((dt, s), got) in enumerate(zip(specs, outs)):
            assert got.dtype == dt, (mode, i, got.dtype)
            g = tf.cast(got, tf.float64).numpy()
            assert np.allclose(g, wants[i], rtol=1e-2, atol=1e-2), f"fp16 {mode} #{i}"

    # tf.IndexedSlices: reduced by gathering values and indices (as upstream); Average divides
    # the values by the number of ranks.
    def slices(q):
        rng = np.random.default_rng(seed("slices", q))
        k = q + 1
        return rng.uniform(-1, 1, (k, 3)), rng.integers(0, 10, k)

    values, indices = slices(r)
    sl = tf.IndexedSlices(tf.constant(values, tf.float32), tf.constant(indices, tf.int64),
                          dense_shape=tf.constant([10, 3], tf.int64))
    all_values = np.concatenate([slices(q)[0] for q in range(n)])
    all_indices = np.concatenate([slices(q)[1] for q in range(n)])
    for mode, fn in (("eager", lambda s, **kw: hvd.allreduce(s, **kw)),
                     ("function", tf.function(lambda s, **kw: hvd.allreduce(s, **kw)))):
        for op, scale in ((hvd.Sum, 1.0), (hvd.Average, 1.0 / n)):
            got = fn(sl, op=op)
            assert isinstance(got, tf.IndexedSlices), (mode, type(got))
            assert np.allclose(got.values.numpy(), all_values * scale, rtol=1e-6), (mode, op)
            assert got.indices.numpy().tolist() == all_indices.tolist(), (mode, op)
            assert got.dense_shape.numpy().tolist() == [10, 3]
    expect_error(lambda: hvd.allreduce(sl, op=hvd.Max), NotImplementedError, "Sum or Average")
    expect_error(lambda: hvd.allreduce(sl, prescale_factor=2.0), NotImplementedError, "scale")

    # broadcast_variables: every dtype group takes the root's values, eager and traced.
    def variables():
        return [tf.Variable(tf.fill([3, 2], float(r + 1))),
                tf.Variable(tf.constant([r, 10 * r], tf.int64)),
                tf.Variable(tf.fill([4], r % 2 == 1)),
                tf.Variable(tf.fill([2], tf.constant(-r, tf.float64))),
                tf.Variable(tf.fill([1], float(r + 5)))]

    def want_vars(root):
        return [np.full([3, 2], root + 1.0), [root, 10 * root], np.full([4], root % 2 == 1),
                np.full([2], -float(root)), [root + 5.0]]

    for root in sorted({0, n - 1}):
        vs = variables()
        assert hvd.broadcast_variables(vs, root_rank=root) is None
        for v, want in zip(vs, want_vars(root)):
            assert (v.numpy() == np.asarray(want)).all(), (root, v)
        vs = variables()

        @tf.function
        def in_graph():
            hvd.broadcast_variables(vs, root_rank=root)  # a group of assigns, run for effect

        in_graph()
        for v, want in zip(vs, want_vars(root)):
            assert (v.numpy() == np.asarray(want)).all(), ("function", root, v)
    assert hvd.broadcast_variables([]) is None

    # broadcast_object / allgather_object: any picklable object, of a size differing by rank.
    obj = {"rank": r, "payload": np.arange(r * 100, dtype=np.int32), "name": "x" * r}
    for root in range(n):
        got = hvd.broadcast_object(obj, root_rank=root)
        assert got["rank"] == root and got["name"] == "x" * root
        assert (got["payload"] == np.arange(root * 100)).all()
    got = hvd.broadcast_object_fn(root_rank=n - 1)([r] * (r + 1))
    assert got == [n - 1] * n, got
    gathered = hvd.allgather_object(obj)
    assert [g["rank"] for g in gathered] == list(range(n))
    assert all((g["payload"] == np.arange(q * 100)).all() for q, g in enumerate(gathered))
    assert hvd.allgather_object(None) == [None] * n
    assert hvd.allgather_object(("t", r), name="tuples") == [("t", q) for q in range(n)]

    # Edge shapes and inputs: scalars, empty tensors, fewer rows than ranks, variables and
    # NumPy arrays as inputs.
    traced = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum), autograph=False)
    for mode, reduce_sum in (("eager", lambda t: hvd.allreduce(t, op=hvd.Sum)), ("fn", traced)):
        got = reduce_sum(tf.constant(r + 1.0))
        assert got.shape == () and float(got) == n * (n + 1) / 2, (mode, got)
        got = reduce_sum(tf.zeros([0, 3], tf.int32))
        assert got.shape == (0, 3) and got.dtype == tf.int32, (mode, got)
    got = hvd.broadcast(tf.constant(float(r)), root_rank=n - 1)
    assert got.shape == () and float(got) == n - 1, got
    assert hvd.broadcast(tf.zeros([0, 2]), 0).shape == (0, 2)
    assert hvd.allgather(tf.zeros([0, 2, 2])).shape == (0, 2, 2)
    got, recv = hvd.alltoall(tf.zeros([0, 2]))
    assert got.shape == (0, 2) and recv.numpy().tolist() == [0] * n
    got = hvd.reducescatter(tf.ones([1, 2]), op=hvd.Sum)  # one row: rank 0 gets it
    assert got.shape == ((1, 2) if r == 0 else (0, 2)) and (got.numpy() == n).all(), got
    expect_error(lambda: hvd.allgather(tf.constant(1.0)), tf.errors.InvalidArgumentError,
                 "scalar")
    got = hvd.allreduce(tf.Variable([1.0, r]), op=hvd.Sum)
    assert got.numpy().tolist() == [n, n * (n - 1) / 2], got
    got = hvd.allreduce(np.arange(3, dtype=np.float64), op=hvd.Sum)
    assert got.dtype == tf.float64 and got.numpy().tolist() == [0, n, 2 * n], got
    assert hvd.grouped_allreduce([]) == [] and hvd.grouped_allgather([]) == []


# ---- DistributedGradientTape --------------------------------------------------------------------
# Rank q's loss: mean((X_q w + b - Y_q)^2) + sum(emb[idx_q]^2 * k_q), with a float32 matrix w,
# a float64 bias b (a second dtype: a second grouped allreduce) and an embedding whose
# gradient is a tf.IndexedSlices. The reference is the mean over ranks of each rank's local
# gradient, all computed locally with a plain tf.GradientTape from every rank's data.

def _tape_data(q):
    rng = np.random.default_rng(seed("tape", q))
    return (tf.constant(rng.uniform(-1, 1, (4 + q, 3)), tf.float32),
            tf.constant(rng.uniform(-1, 1, (4 + q, 2)), tf.float32),
            tf.constant(rng.integers(0, 10, 5), tf.int32),  # with duplicates
            float(q + 1))


def _tape_loss(w, b, emb, data):
    x, y, idx, k = data
    pred = tf.matmul(x, w) + tf.cast(b, tf.float32)
    return (tf.reduce_mean(tf.square(pred - y)) +
            tf.reduce_sum(tf.square(tf.gather(emb, idx))) * k)


def _dense(g):
    return tf.convert_to_tensor(g).numpy()


def sc_tape():
    r, n = hvd.rank(), hvd.size()
    w = tf.Variable(tf.reshape(tf.range(6, dtype=tf.float32) / 10, [3, 2]))
    b = tf.Variable(tf.constant([0.5, -0.5], tf.float64))
    emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float32) / 40, [10, 4]))
    variables = [w, b, emb]
    local = []
    for q in range(n):
        with tf.GradientTape() as tape:
            loss = _tape_loss(w, b, emb, _tape_data(q))
        local.append([_dense(g) for g in tape.gradient(loss, variables)])
    mean = [sum(gs[i] for gs in local) / n for i in range(3)]
    mine = _tape_data(r)

    def run(options, as_dict):
        with tf.GradientTape() as tape:
            loss = _tape_loss(w, b, emb, mine)
        tape = hvd.DistributedGradientTape(tape, **options)
        assert isinstance(tape, tf.GradientTape)
        if as_dict:  # nested sources come back in the same structure
            grads = tape.gradient(loss, {"w": w, "rest": (b, emb)})
            return [grads["w"], grads["rest"][0], grads["rest"][1]]
        return tape.gradient(loss, variables)

    variants = [
        ("default", {}, 1.0, 1e-6),
        ("sparse_as_dense", {"sparse_as_dense": True}, 1.0, 1e-6),
        ("predivide", {"gradient_predivide_factor": 2.0}, 1.0, 1e-6),
        ("num_groups", {"num_groups": 2}, 1.0, 1e-6),
        ("groups", {"groups": [[w, emb]]}, 1.0, 1e-6),
        ("fp16", {"compression": hvd.Compression.fp16}, 1.0, 1e-2),
        ("sum", {"op": hvd.Sum}, float(n), 1e-6),
    ]
    for name, options, scale, tol in variants:
        for traced in (False, True):
            for as_dict in ((False, True) if name == "default" else (False,)):
                fn = tf.function(lambda: run(options, as_dict)) if traced else \
                    (lambda: run(options, as_dict))
                grads = fn()
                what = f"tape {name} {'function' if traced else 'eager'} dict={as_dict}"
                assert grads[0].dtype == tf.float32 and grads[1].dtype == tf.float64, what
                sparse = isinstance(grads[2], tf.IndexedSlices)
                assert sparse == (name != "sparse_as_dense"), f"{what}: {type(grads[2])}"
                for i, g in enumerate(grads):
                    assert np.allclose(_dense(g), mean[i] * scale, rtol=tol, atol=tol), \
                        f"{what}: gradient #{i} {_dense(g).ravel()[:4]} != " \
                        f"{(mean[i] * scale).ravel()[:4]}"
    # A gradient that is None (variable not used) stays None.
    unused = tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = _tape_loss(w, b, emb, mine)
    grads = hvd.DistributedGradientTape(tape).gradient(loss, [w, unused])
    assert grads[1] is None and np.allclose(grads[0].numpy(), mean[0], rtol=1e-6)
    # A few SGD steps on the averaged gradient keep the ranks' weights identical.
    opt = tf.keras.optimizers.SGD(0.1)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = _tape_loss(w, b, emb, mine)
        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=True)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    for v in variables:
        gathered = hvd.allgather(tf.expand_dims(v, 0)).numpy()
        assert all((gathered[q] == gathered[0]).all() for q in range(n)), v.name


# ---- the tf.compat.v1 graph path --------------------------------------------------------------

def sc_v1_graph():
    """The original Horovod example, in graph mode: hvd.DistributedOptimizer around a
    tf.compat.v1 optimizer, BroadcastGlobalVariablesHook in a MonitoredTrainingSession, a tiny
    linear model trained on each rank's shard. Ranks start from different weights; after the
    broadcast and every step they must hold identical weights, and the loss must fall."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(seed("v1", r))
    x_data = rng.uniform(-1, 1, (32, 2)).astype(np.float32)
    y_data = x_data @ np.array([[2.0], [-3.0]], np.float32) + 0.5
    x = v1.placeholder(tf.float32, [None, 2])
    y = v1.placeholder(tf.float32, [None, 1])
    w = v1.get_variable("w", [2, 1], initializer=v1.constant_initializer(float(r + 1)))
    b = v1.get_variable("b", [1], initializer=v1.constant_initializer(-float(r)))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    global_step = v1.train.get_or_create_global_step()
    opt = hvd.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.2))
    assert isinstance(opt, v1.train.Optimizer)
    train_op = opt.minimize(loss, global_step=global_step)
    weights = tf.concat([tf.reshape(w, [-1]), b], 0)
    gathered = hvd.allgather(tf.expand_dims(weights, 0))
    mean_loss = hvd.allreduce(loss, op=hvd.Average)
    feed = {x: x_data, y: y_data}
    losses = []
    hooks = [hvd.BroadcastGlobalVariablesHook(0)]
    with v1.train.MonitoredTrainingSession(hooks=hooks, checkpoint_dir=None) as sess:
        got = sess.run(gathered)
        assert (got == np.array([1.0, 1.0, 0.0], np.float32)).all(), \
            f"after the broadcast every rank should hold rank 0's weights: {got}"
        for _ in range(40):
            _, current = sess.run([train_op, mean_loss], feed_dict=feed)
            losses.append(float(current))
            got = sess.run(gathered)
            assert all((got[q] == got[0]).all() for q in range(n)), f"weights differ: {got}"
        assert sess.run(global_step) == 40
    assert losses[-1] < 0.01 * losses[0], f"loss did not fall: {losses[0]} -> {losses[-1]}"
    assert all(b_ <= a_ * 1.0001 for a_, b_ in zip(losses, losses[1:])), losses


def sc_v1_accumulate():
    """backward_passes_per_step=2 on the tf.compat.v1 path (graph mode, MonitoredTrainingSession,
    BroadcastGlobalVariablesHook(0)), for GradientDescent with average_aggregated_gradients
    False and True, and Momentum (slots created inside the cond's branch) with True. The model
    has dense weights and an embedding (tf.gather: IndexedSlices gradients). Each pass feeds
    every rank a batch of its own, so the window's passes differ. After every run of the train
    op, every rank's weights are identical and equal a float64 NumPy reference: unchanged after
    odd runs; after even ones updated by the sum (or mean) over the 2 passes of the ranks'
    mean gradients. Also: compute_gradients() returns local gradients (the embedding's still
    IndexedSlices); the accumulators and counter are non-trainable LOCAL_VARIABLES (so not
    broadcast); no allreduce op lies outside the cond; global_step counts every run."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    k, lr, m, passes, momentum = 2, 0.1, 8, 6, 0.9

    def batch(q, p):  # rank q's batch of pass p
        rng = np.random.default_rng(seed("v1_accumulate", q, p))
        return rng.uniform(-1, 1, (m, 2)), rng.integers(0, 5, m), rng.uniform(-1, 1, (m, 1))

    def local_grads(params, q, p):  # of rank q's loss at pass p, in float64
        w, b, e = params
        xs, idx, ys = batch(q, p)
        res = xs @ w + b + e[idx] - ys
        de = np.zeros_like(e)
        np.add.at(de, idx, 2 / m * res)
        return [2 / m * xs.T @ res, 2 / m * res.sum(0), de]

    for kind, average in [("sgd", False), ("sgd", True), ("momentum", True)]:
        what = f"{kind}, average_aggregated_gradients={average}"
        with tf.Graph().as_default() as graph:
            x = v1.placeholder(tf.float32, [None, 2])
            i = v1.placeholder(tf.int32, [None])
            y = v1.placeholder(tf.float32, [None, 1])
            w = v1.get_variable("w", [2, 1], initializer=v1.constant_initializer(float(r + 1)))
            b = v1.get_variable("b", [1], initializer=v1.constant_initializer(-float(r)))
            e = v1.get_variable("e", [5, 1], initializer=v1.constant_initializer(0.5 * r))
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b + tf.gather(e, i) - y))
            global_step = v1.train.get_or_create_global_step()
            base = (v1.train.GradientDescentOptimizer(lr) if kind == "sgd" else
                    v1.train.MomentumOptimizer(lr, momentum))
            opt = hvd.DistributedOptimizer(base, backward_passes_per_step=k,
                                           average_aggregated_gradients=average)
            grads_and_vars = opt.compute_gradients(loss)
            grad_of = {v.name: g for g, v in grads_and_vars}
            assert isinstance(grad_of["e:0"], tf.IndexedSlices), what
            train_op = opt.apply_gradients(grads_and_vars, global_step=global_step)
            local = v1.local_variables()
            assert len(local) == 4 and not set(local) & set(v1.global_variables()), (what, local)
            assert not set(local) & set(v1.trainable_variables()), what
            assert {v.name for v in local} == {f"{opt.get_name()}/aggregation/{s}:0"
                                               for s in ("counter", "w", "b", "e")}, local
            outside = [o.name for o in graph.get_operations() if o.type == "HorovodAllreduce"]
            assert not outside, f"{what}: allreduce outside the cond: {outside}"
            flat = tf.concat([tf.reshape(t, [-1]) for t in (w, b, e)], 0)
            gathered = hvd.allgather(tf.expand_dims(flat, 0))

            params = [np.full((2, 1), 1.0), np.zeros(1), np.zeros((5, 1))]  # rank 0's
            velocity = [np.zeros_like(t) for t in params]
            hooks = [hvd.BroadcastGlobalVariablesHook(0)]
            with v1.train.MonitoredTrainingSession(hooks=hooks, checkpoint_dir=None) as sess:
                before = sess.run(gathered)
                want = np.concatenate([t.ravel() for t in params])
                assert (before == want).all(), f"{what}: after the broadcast: {before}"
                xs, idx, ys = batch(r, 0)
                got = sess.run(grad_of["w:0"], {x: xs, i: idx, y: ys})
                assert np.allclose(got, local_grads(params, r, 0)[0], rtol=1e-5, atol=1e-6), \
                    f"{what}: compute_gradients should give the local gradient: {got.ravel()}"
                window = []
                for p in range(passes):
                    xs, idx, ys = batch(r, p)
                    sess.run(train_op, {x: xs, i: idx, y: ys})
                    window.append([np.mean(g, 0) for g in
                                   zip(*[local_grads(params, q, p) for q in range(n)])])
                    applied = len(window) == k
                    if applied:
                        step = [sum(g) / (k if average else 1) for g in zip(*window)]
                        if kind == "momentum":
                            velocity = [momentum * v + g for v, g in zip(velocity, step)]
                            step = velocity
                        params = [t - lr * g for t, g in zip(params, step)]
                        window = []
                    got = sess.run(gathered)
                    assert all((got[q] == got[0]).all() for q in range(n)), \
                        f"{what}, run {p + 1}: weights differ across ranks: {got}"
                    assert (got[0] != before[0]).any() if applied else \
                        (got[0] == before[0]).all(), \
                        f"{what}, run {p + 1}: changed={applied} expected: {before[0]} -> {got[0]}"
                    want = np.concatenate([t.ravel() for t in params])
                    assert np.allclose(got[0], want, rtol=1e-5, atol=1e-6), \
                        f"{what}, run {p + 1}:\n got  {got[0]}\n want {want}"
                    assert sess.run(global_step) == p + 1, (what, p)
                    before = got

    # Global variables (what checkpoints and the broadcast see) are named as without
    # aggregation, also those the wrapped optimizer creates inside the cond (Adam's powers).
    names = []
    for passes_per_step in (1, k):
        with tf.Graph().as_default():
            v = v1.get_variable("v", [3])
            with v1.name_scope("train"):
                opt = hvd.DistributedOptimizer(v1.train.AdamOptimizer(0.1),
                                               backward_passes_per_step=passes_per_step)
                opt.minimize(tf.reduce_sum(v * v))
            names.append(sorted(x.name for x in v1.global_variables()))
    assert names[0] == names[1] and "train/beta1_power:0" in names[0], names


# ---- errors -------------------------------------------------------------------------------------

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
        ("dtype", "Allreduce", lambda nm, i: hvd.allreduce(tf.ones([4], f32_or_f64, name=i),
                                                           name=nm),
         mismatch, ("data types", even, odd, "float32", "float64")),
        ("shape", "Allreduce", lambda nm, i: hvd.allreduce(tf.ones([4 + r % 2], name=i), name=nm),
         mismatch, ("shapes", even, odd, "[4]", "[5]")),
        ("op", "Allreduce", lambda nm, i: hvd.allreduce(tf.ones([3], name=i), name=nm,
                                                        op=hvd.Sum if r % 2 else hvd.Max),
         mismatch, ("reduction operations", even, odd, "Sum", "Max")),
        ("root", "Broadcast", lambda nm, i: hvd.broadcast(tf.ones([3], name=i), r % 2, name=nm),
         mismatch, ("root", even, odd)),
        ("gather", "Allgather", lambda nm, i: hvd.allgather(tf.ones([2, 2 + r % 2], name=i),
                                                            name=nm),
         mismatch, ("first", even, odd)),
        ("scale", "Allreduce", lambda nm, i: hvd.allreduce(tf.ones([2], name=i), name=nm,
                                                           prescale_factor=1.0 + r % 2),
         mismatch, ("prescale", even, odd)),
        ("rs", "Reducescatter", lambda nm, i: hvd.reducescatter(tf.ones([4, 1 + r % 2], name=i),
                                                                name=nm),
         mismatch, ("shapes", even, odd)),
        # One tensor of a group disagrees: the group's op fails on every rank.
        ("group", "Allreduce", lambda nm, i: hvd.grouped_allreduce(
            [tf.ones([2], name=i), tf.ones([3 + r % 2])], name=nm),
         mismatch, ("shapes", even, odd)),
        # A bad root on every rank, and on one rank only: InvalidArgument everywhere.
        ("badroot", "Broadcast", lambda nm, i: hvd.broadcast(tf.ones([2], name=i), n, name=nm),
         invalid, ("root rank", str(n))),
        ("badroot1", "Broadcast", lambda nm, i: hvd.broadcast(tf.ones([2], name=i),
                                                              -1 if r == 1 else 0, name=nm),
         invalid, ("on rank 1", "-1")),
        # Alltoall splits that do not sum to the rows.
        ("splits", "Alltoall", lambda nm, i: hvd.alltoall(tf.ones([4], name=i),
                                                          splits=[5] + [0] * (n - 1), name=nm),
         invalid, ("split",)),
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
    expect(lambda: (hvd.allreduce if r % 2 else hvd.allgather)(tf.ones([3]), name="mm/kind"),
           mismatch, "mm/kind", "operations", "ALLREDUCE", "ALLGATHER", even, odd)
    # Cached in a steady state, then one rank changes shape: named, on every rank.
    for _ in range(3):
        hvd.allreduce(tf.ones([6]), name="mm/cached")
    expect(lambda: hvd.allreduce(tf.ones([6 + (r == n - 1)]), name="mm/cached"),
           mismatch, "mm/cached", str([n - 1]), "[7]")
    # The same with a tf.function called repeatedly, retraced on the last rank for a new shape.
    fn = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum))
    for _ in range(3):
        assert (fn(tf.ones([6])).numpy() == n).all()
    expect(lambda: fn(tf.ones([6 + (r == n - 1)])), mismatch, "HorovodAllreduce_t_0",
           str([n - 1]), "[7]")
    # Unsupported: Adasum, on every entry point.
    expect_error(lambda: hvd.allreduce(tf.ones([2]), op=hvd.Adasum), NotImplementedError, "Adasum")
    expect_error(lambda: hvd.reducescatter(tf.ones([2]), op=hvd.Adasum), NotImplementedError,
                 "Adasum")
    expect_error(lambda: hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                                  op=hvd.Adasum), NotImplementedError, "Adasum")
    v = tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * v)
    expect_error(lambda: hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [v]),
                 NotImplementedError, "Adasum")
    works()


# ---- the NumPy and TF frontends in one process --------------------------------------------------

def sc_frontends():
    """horovod.numpy and horovod.tensorflow share one engine: one init, the same topology, and
    ops of both in flight at once (named and unnamed: their counter names do not collide)."""
    import horovod.numpy as hnp
    r, n = hvd.rank(), hvd.size()
    assert hnp.is_initialized() and hnp.rank() == r and hnp.size() == n
    hnp.init()  # a no-op on the running engine
    assert hvd.local_rank() == hnp.local_rank()
    step = tf.function(lambda t: (hvd.allreduce(t, op=hvd.Sum), hvd.allgather(t)))
    for i in range(20):
        h = hnp.allreduce_async(np.full(5, i + r, np.float64), op=hnp.Sum, name=f"mix/np/{i}")
        h2 = hnp.allgather_async(np.full((1, 2), r, np.int32))  # unnamed NumPy op
        t = hvd.allreduce(tf.fill([4], float(i * r)), op=hvd.Sum)  # unnamed TF op
        a, g = step(tf.fill([2], float(r + i)))
        nb = hnp.broadcast(np.full(3, r, np.int64), root_rank=n - 1, name=f"mix/bc/{i}")
        tb = hvd.broadcast(tf.fill([3], r), root_rank=0, name=f"mix/bc/tf/{i}")
        assert (hnp.synchronize(h) == n * i + n * (n - 1) / 2).all()
        assert hnp.synchronize(h2)[:, 0].tolist() == list(range(n))
        assert (t.numpy() == i * n * (n - 1) / 2).all()
        assert (a.numpy() == n * i + n * (n - 1) / 2).all()
        assert sorted(g.numpy().tolist()) == sorted(float(q + i) for q in range(n) for _ in "xy")
        assert (nb == n - 1).all() and (tb.numpy() == 0).all()


def sc_while_loop():
    """Ops inside a tf.while_loop whose iterations run in parallel (AutoGraph's default,
    parallel_iterations=10): one node, many iterations in flight at once. The loop frame and
    iteration are part of the negotiation name, so they neither collide ("already in flight")
    nor pair up with another iteration on another rank."""
    r, n = hvd.rank(), hvd.size()

    @tf.function
    def loop(x):
        def body(i, acc):
            return i + 1, acc + hvd.allreduce(x * tf.cast(i + 1, tf.float32), op=hvd.Sum)
        return tf.while_loop(lambda i, acc: i < 12, body, (0, tf.zeros_like(x)),
                             parallel_iterations=10)[1]

    for _ in range(2):  # the second call runs the same (cached) names again
        got = loop(tf.fill([3], float(r + 1))).numpy()
        want = sum(range(1, 13)) * n * (n + 1) / 2
        assert (got == want).all(), (got, want)


SCENARIOS = {name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}
NO_INIT = {"v1_graph", "v1_accumulate"}  # initialize after disabling eager execution


def main(names):
    """Runs the scenarios in order in this one process (TF's import costs seconds per rank, so
    the tests batch them). Prints "OK <name> rank=<r>" after each; the first failure prints
    "FAIL <name> rank=<r>" and its traceback, then ends the process at once, which makes
    mpirun end the job: the later scenarios never start, and nothing waits for this rank."""
    import traceback
    if not NO_INIT & set(names):
        hvd.init()
    for name in names:
        try:
            SCENARIOS[name]()
        except BaseException:  # noqa: B036  (SystemExit too: the report must come out)
            rank = os.environ.get("OMPI_COMM_WORLD_RANK", "?")
            print(f"FAIL {name} rank={rank}\n{traceback.format_exc()}", flush=True)
            os._exit(1)
        print(f"OK {name} rank={hvd.rank()}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1].split(","))
