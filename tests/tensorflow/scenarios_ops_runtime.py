"""How ops meet the engine across steps and frontends: the same graph every step (the
response cache), loop iterations in flight at once, the NumPy frontend in the same process."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd


def sc_steady():
    """A tf.function called many times: the same node names every step, so the engine's
    response cache serves every step after the first (the test reads the timeline to confirm).
    Results must stay right while the values change every step."""
    r, n = hvd.rank(), hvd.size()
    steps = 60  # test_ops.py knows this count and the input names below

    @tf.function
    def step(v):  # the function's name is in its ops' names: the test finds them by it
        a = hvd.allreduce(tf.fill([8], v + r, name="steady_a"), op=hvd.Sum)
        b, c = hvd.grouped_allreduce(
            [tf.fill([3, 2], v * (r + 1), name="steady_b"), tf.fill([5], v - r, name="steady_c")],
            op=hvd.Average,
        )
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

        return tf.while_loop(
            lambda i, acc: i < 12, body, (0, tf.zeros_like(x)), parallel_iterations=10
        )[1]

    for _ in range(2):  # the second call runs the same (cached) names again
        got = loop(tf.fill([3], float(r + 1))).numpy()
        want = sum(range(1, 13)) * n * (n + 1) / 2
        assert (got == want).all(), (got, want)
