"""Gradients of every op through tape.gradient, eager and in a tf.function."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import rows_of, seed

# Every rank q has its own objective on its output y_q of the op:
#     L_q(y_q) = sum(w_q * y_q**2 + c_q * y_q),  dL_q/dy_q = 2 w_q y_q + c_q,
# with w_q, c_q drawn from q's seed. What tape.gradient(L_r, x_r) returns on rank r is, by
# Horovod's (upstream's) definition, the gradient of a global objective F with respect to x_r:
#   - allreduce (scaled by prescale * postscale, and 1/n for Average) and
#     alltoall:                  F = sum_q L_q        (the op's adjoint, as a sum over ranks)
#   - allgather, broadcast:      F = (1/n) sum_q L_q  (upstream averages these gradients)
#   - reducescatter (scaled by prescale * postscale, and 1/n for Average):
#                                F = n sum_q L_q      (upstream scales its gradient by n)
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


def _check_gradient(what, op_fn, x_np, out_shape, salt, f, want_grad, traced):
    """F = f * sum_q L_q: f is 1, 1/n (allgather, broadcast) or n (reducescatter)."""
    r = hvd.rank()
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
    assert np.allclose(g.numpy(), want_grad, rtol=1e-10, atol=1e-10), (
        f"{what}: gradient {g.numpy().ravel()[:6]} != analytic {np.ravel(want_grad)[:6]}"
    )
    d = np.random.default_rng(seed("direction", r, salt)).normal(size=x_np.shape)
    eps = 1e-3
    plus = _global_sum(loss_fn(tf.constant(x_np + eps * d)))
    minus = _global_sum(loss_fn(tf.constant(x_np - eps * d)))
    numeric = (plus - minus) / (2 * eps) * f
    analytic = _global_sum(np.sum(g.numpy() * d))
    assert abs(numeric - analytic) <= 1e-7 * (1 + abs(analytic)), (
        f"{what}: finite difference {numeric} != sum_r <g_r, d_r> {analytic}"
    )


def sc_gradients():
    for traced in (False, True):
        mode = "function" if traced else "eager"
        _allreduce_gradients(mode, traced)
        _grouped_allreduce_gradients(mode, traced)
        _allgather_gradients(mode, traced)
        _broadcast_gradients(mode, traced)
        _alltoall_gradients(mode, traced)
        _reducescatter_gradients(mode, traced)


def _allreduce_gradients(mode, traced):
    """y = s * sum_p x_p on every rank; g_r = s * sum_q dL_q/dy."""
    r, n = hvd.rank(), hvd.size()
    shape = (3, 4)
    xs = [_x(q, shape, 0) for q in range(n)]
    for op, pre, post in (
        (hvd.Sum, 1.0, 1.0),
        (hvd.Average, 1.0, 1.0),
        (hvd.Average, 0.5, 3.0),
        (hvd.Sum, 2.0, 0.25),
    ):
        s = pre * post / (n if op == hvd.Average else 1)
        y = s * sum(xs)
        want = s * sum(_dloss(q, y, 1) for q in range(n))
        _check_gradient(
            f"allreduce {mode} op={op} pre={pre} post={post}",
            lambda x: hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post),
            xs[r],
            shape,
            1,
            1.0,
            want,
            traced,
        )


def _grouped_allreduce_gradients(mode, traced):
    """Each output's gradient as for allreduce; an unused output gets zeros."""
    r, n = hvd.rank(), hvd.size()
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
        assert np.allclose(ga.numpy(), want_a) and np.allclose(gb.numpy(), want_b), (
            f"grouped_allreduce gradient {mode} use_b={use_b}: {ga}, {gb}"
        )


def _allgather_gradients(mode, traced):
    """y = concat_p x_p (rank 1 has no rows, rank p != 1 has p+1); g_r = mean_q dL_q/dy, r's
    rows."""
    r, n = hvd.rank(), hvd.size()
    rows = [0 if q == 1 else q + 1 for q in range(n)]
    xs = [_x(q, (rows[q], 3), 4) for q in range(n)]
    y = np.concatenate(xs)
    start = sum(rows[:r])
    want = (sum(_dloss(q, y, 5) for q in range(n)) / n)[start : start + rows[r]]
    _check_gradient(f"allgather {mode}", hvd.allgather, xs[r], y.shape, 5, 1 / n, want, traced)


def _broadcast_gradients(mode, traced):
    """y = x_root; g_root = mean_q dL_q/dy, zero elsewhere."""
    r, n = hvd.rank(), hvd.size()
    xs = [_x(q, (2, 3), 6) for q in range(n)]
    for root in sorted({0, n - 1}):
        y = xs[root]
        want = sum(_dloss(q, y, 7) for q in range(n)) / n if r == root else np.zeros((2, 3))
        _check_gradient(
            f"broadcast {mode} root {root}",
            lambda x: hvd.broadcast(x, root_rank=root),
            xs[r],
            (2, 3),
            7,
            1 / n,
            want,
            traced,
        )


def _alltoall_gradients(mode, traced):
    """Rank p sends splits_p[q] rows to q; y_q = concat_p (p's rows for q);
    g_r = concat_q (the rows of dL_q/dy_q that came from r)."""
    r, n = hvd.rank(), hvd.size()

    def splits_of(q):
        return [(q + d) % 3 for d in range(n)]

    xs = [_x(q, (sum(splits_of(q)), 2), 8) for q in range(n)]

    def received(q):
        return np.concatenate(
            [xs[p][sum(splits_of(p)[:q]) : sum(splits_of(p)[: q + 1])] for p in range(n)]
        )

    back = []
    for q in range(n):
        dq = _dloss(q, received(q), 9)
        offset = sum(splits_of(p)[q] for p in range(r))
        back.append(dq[offset : offset + splits_of(r)[q]])
    _check_gradient(
        f"alltoall {mode}",
        lambda x: hvd.alltoall(x, splits=splits_of(r))[0],
        xs[r],
        received(r).shape,
        9,
        1.0,
        np.concatenate(back),
        traced,
    )


def _reducescatter_gradients(mode, traced):
    """y_q = s * (sum_p x_p)[q's rows]; g_r = n * s * concat_q dL_q/dy_q (upstream's
    definition: its Sum gradient is scaled by n, its Average one not by 1/n)."""
    r, n = hvd.rank(), hvd.size()
    shape = (2 * n + 1, 2)
    xs = [_x(q, shape, 10) for q in range(n)]
    rows = rows_of(shape[0], n)
    for op, pre, post in ((hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0), (hvd.Sum, 0.5, 3.0)):
        s = pre * post / (n if op == hvd.Average else 1)
        full = s * sum(xs)
        blocks = [full[sum(rows[:q]) : sum(rows[: q + 1])] for q in range(n)]
        want = n * s * np.concatenate([_dloss(q, blocks[q], 11) for q in range(n)])
        _check_gradient(
            f"reducescatter {mode} op={op} pre={pre} post={post}",
            lambda x: hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post),
            xs[r],
            blocks[r].shape,
            11,
            n,
            want,
            traced,
        )
