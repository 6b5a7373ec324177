"""Names of unnamed ops in a tf.function when the ranks' processes differ around the same
program (issue 21), and the object collectives inside a tf.function and in tf.compat.v1
graph mode."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd


def sc_rank_dependent_names():
    """Unnamed ops in a tf.function are named alike on every rank although the ranks' tensor
    names and name scopes differ: rank 0 built one more Keras layer (so the layers, and the
    gradients' tensor names, are "dense_1" there and "dense" elsewhere), traced one more
    tf.function with unnamed ops, and the ops run under a name scope of each rank's own. Before,
    ops were named after their input tensor and scope: every rank waited for the others' names
    (a hang). Results against NumPy; the step runs twice (the second from the cache)."""
    import keras

    r, n = hvd.rank(), hvd.size()
    if r == 0:
        keras.layers.Dense(3)
        extra = tf.function(lambda t: hvd.allreduce(t * 2) + hvd.allgather(t)[0])
        extra.get_concrete_function(tf.TensorSpec([2]))
    layer = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="zeros")
    layer.build((None, 3))
    opt = keras.optimizers.SGD(0.1)  # its name is numbered process-wide too

    @tf.function
    def train_step(x):
        with tf.name_scope(f"rank{r}"):
            with tf.GradientTape() as tape:
                y = layer(x)
                loss = tf.reduce_sum(y)
            tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, layer.trainable_variables)
            total = hvd.allreduce(y, op=hvd.Sum)
            rows = hvd.allgather(y)
            root = hvd.broadcast(y, root_rank=n - 1)
            pair = hvd.grouped_allreduce([y, tf.reduce_sum(y)], op=hvd.Sum)
        opt.apply_gradients(zip(grads, layer.trainable_variables))
        return grads, total, rows, root, pair

    xs = [np.full((1, 3), q + 1.0, np.float32) for q in range(n)]
    for _ in range(2):
        kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
        grads, total, rows, root, pair = train_step(tf.constant(xs[r]))
        want_kernel_grad = sum(x.T @ np.ones((1, 2)) for x in xs) / n
        assert np.allclose(grads[0].numpy(), want_kernel_grad), grads[0]
        assert np.allclose(grads[1].numpy(), np.ones(2)), grads[1]
        ys = [x @ kernel + bias for x in xs]
        assert np.allclose(total.numpy(), sum(ys)), total
        assert np.allclose(rows.numpy(), np.concatenate(ys)), rows
        assert np.allclose(root.numpy(), ys[n - 1]), root
        assert np.allclose(pair[1].numpy(), sum(y.sum() for y in ys)), pair[1]
    assert train_step.experimental_get_tracing_count() == 1


def sc_objects_in_function():
    """broadcast_object and allgather_object inside a tf.function: exchanged when the function
    is traced, their results are the Python objects the trace uses (here baked into the
    function's output), named and unnamed; a retrace on every rank exchanges again; eager
    calls afterwards still meet."""
    r, n = hvd.rank(), hvd.size()
    cfg = {"lr": 0.25, "tag": "cfg"}

    @tf.function
    def fn(x):
        got = hvd.broadcast_object(cfg if r == 0 else None)
        named = hvd.broadcast_object([r] * (r + 1), root_rank=n - 1, name="objfn")
        ranks = hvd.allgather_object({"r": r, "pad": "x" * r})
        return x * got["lr"] + len(named) + sum(d["r"] for d in ranks) + len(ranks[-1]["pad"])

    want = 2.0 * 0.25 + n + n * (n - 1) / 2 + (n - 1)
    for _ in range(3):  # traced once: the exchange happened then, the calls reuse its result
        assert float(fn(tf.constant(2.0))) == want
    assert fn.experimental_get_tracing_count() == 1
    # A retrace (a new input signature, on every rank) exchanges again.
    assert float(fn(tf.constant(2.0, tf.float64))) == want
    # Eagerly afterwards, as before.
    assert hvd.allgather_object(r) == list(range(n))


def sc_objects_in_graph_mode():
    """In tf.compat.v1 graph mode the object collectives run through the default session or
    the one passed (as upstream) and return Python objects; without a session they raise a
    RuntimeError saying what to do, on every rank (nothing was submitted)."""
    r, n = hvd.rank(), hvd.size()
    with tf.Graph().as_default():
        try:
            hvd.broadcast_object(1)
        except RuntimeError as e:
            assert "session" in str(e), e
        else:
            raise AssertionError("no RuntimeError without a session")
        with tf.compat.v1.Session() as sess:
            got = hvd.broadcast_object({"a": np.arange(3)} if r == 0 else None, session=sess)
            assert got["a"].tolist() == [0, 1, 2], got
            with sess.as_default():
                assert hvd.allgather_object(("g", r)) == [("g", q) for q in range(n)]
                fn = hvd.broadcast_object_fn(root_rank=n - 1, name="v1fn")
                assert fn(r * 10) == (n - 1) * 10
                assert fn("again" if r == n - 1 else None) == "again"
