"""tf.IndexedSlices in grouped_allreduce (alone and mixed with dense tensors), and training
with sparse gradients (tf.gather on an embedding) through DistributedGradientTape and the
Keras DistributedOptimizer, against NumPy references every rank computes itself."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import seed
from tests.support.scenario import expect_error


def _slices(q, i):
    """Rank q's i-th IndexedSlices (values, indices): q + i + 1 rows, repeated indices."""
    rng = np.random.default_rng(seed("gsparse", q, i))
    k = q + i + 1
    return rng.uniform(-1, 1, (k, 3)), rng.integers(0, 6, k)


def _dense(q, i):
    return np.random.default_rng(seed("gdense", q, i)).uniform(-1, 1, (4, 2))


def sc_grouped_sparse():
    """grouped_allreduce of [dense, slices, dense (float64), slices (float64)] and of slices
    only: dense members reduced as usual, slices gathered (values and indices of every rank in
    rank order; Average divides the values by the number of ranks), eager and in a tf.function,
    named and unnamed; Max or scale factors with slices raise NotImplementedError on every rank
    before any op is submitted (the next grouped op works)."""
    r, n = hvd.rank(), hvd.size()
    dtypes = [tf.float32, tf.float32, tf.float64, tf.float64]

    def member(q, i):
        if i % 2 == 0:
            return tf.constant(_dense(q, i), dtypes[i])
        values, indices = _slices(q, i)
        return tf.IndexedSlices(
            tf.constant(values, dtypes[i]),
            tf.constant(indices, tf.int64 if i == 1 else tf.int32),
            dense_shape=tf.constant([6, 3], tf.int64),
        )

    mine = [member(r, i) for i in range(4)]

    def check(got, op, what, positions=range(4)):
        scale = 1.0 / n if op == hvd.Average else 1.0
        assert len(got) == len(positions), (what, len(got))
        for g, i in zip(got, positions):
            if i % 2 == 0:
                assert isinstance(g, tf.Tensor) and g.dtype == dtypes[i], (what, i, type(g))
                want = sum(_dense(q, i) for q in range(n)) * scale
                assert np.allclose(g.numpy(), want, rtol=1e-6), (what, i)
                continue
            assert isinstance(g, tf.IndexedSlices), (what, i, type(g))
            values = np.concatenate([_slices(q, i)[0] for q in range(n)])
            indices = np.concatenate([_slices(q, i)[1] for q in range(n)])
            assert g.values.dtype == dtypes[i] and g.indices.dtype == mine[i].indices.dtype
            assert np.allclose(g.values.numpy(), values * scale, rtol=1e-6), (what, i)
            assert g.indices.numpy().tolist() == indices.tolist(), (what, i)
            assert g.dense_shape.numpy().tolist() == [6, 3], (what, i)
            # What an optimizer applies: the densified sum (mean) of every rank's gradient.
            want = np.zeros((6, 3))
            for q in range(n):
                np.add.at(want, _slices(q, i)[1], _slices(q, i)[0] * scale)
            assert np.allclose(tf.convert_to_tensor(g).numpy(), want, rtol=1e-5), (what, i)

    traced = tf.function(lambda ts, op, name: hvd.grouped_allreduce(ts, op=op, name=name))
    for op in (hvd.Sum, hvd.Average):
        for name in (None, "gs/mixed"):
            check(hvd.grouped_allreduce(mine, op=op, name=name), op, f"eager {op} {name}")
            check(traced(mine, op, name), op, f"function {op} {name}")
        only = [mine[1], mine[3]]
        check(hvd.grouped_allreduce(only, op=op), op, f"slices only {op}", [1, 3])
        check(traced(only, op, "gs/only"), op, f"function slices only {op}", [1, 3])
    # The deprecated average= flag, as for dense tensors.
    check(hvd.grouped_allreduce(mine, average=True), hvd.Average, "average=True")
    expect_error(
        lambda: hvd.grouped_allreduce(mine, op=hvd.Max), NotImplementedError, "Sum or Average"
    )
    expect_error(
        lambda: hvd.grouped_allreduce(mine, op=hvd.Sum, postscale_factor=2.0),
        NotImplementedError,
        "scale factors",
    )
    check(hvd.grouped_allreduce(mine, op=hvd.Sum), hvd.Sum, "after the errors")


# Rank q's loss: sum over its ids of the embedding rows' dot with a weight vector, plus a dense
# layer, so that the embedding's gradient is a tf.IndexedSlices (tf.gather) with repeated ids.
def _batch(q, step):
    rng = np.random.default_rng(seed("sparse_train", q, step))
    return rng.integers(0, 8, 3 + q), rng.uniform(-1, 1, (3 + q, 4))


def _loss(emb, w, ids, x):
    rows = tf.gather(emb, ids)
    return tf.reduce_sum(rows * tf.matmul(tf.cast(x, tf.float32), w)) / 10.0


def _reference_step(emb, w, q_batches, lr):
    """One SGD step on the mean over ranks of each rank's gradient, in float64 NumPy."""
    g_emb, g_w = np.zeros_like(emb), np.zeros_like(w)
    for ids, x in q_batches:
        xw = x @ w
        np.add.at(g_emb, ids, xw / 10.0)
        g_w += x.T @ emb[ids] / 10.0
    n = len(q_batches)
    return emb - lr * g_emb / n, w - lr * g_w / n


def sc_sparse_training():
    """Three SGD steps with an embedding (sparse gradient) and a dense weight, through
    DistributedGradientTape and through the Keras DistributedOptimizer, with sparse_as_dense
    False and True, eager and in a tf.function: every rank's weights match a float64 NumPy
    reference of SGD on the ranks' mean gradient, and the tape gives IndexedSlices unless
    sparse_as_dense."""
    import keras

    import horovod.tensorflow.keras as hvdk

    r, n = hvd.rank(), hvd.size()
    lr = 0.5
    emb0 = np.arange(32, dtype=np.float64).reshape(8, 4) / 32
    w0 = np.linspace(-1, 1, 16).reshape(4, 4)
    for how in ("tape", "optimizer"):
        for sparse_as_dense in (False, True):
            for traced in (False, True):
                what = f"{how} sparse_as_dense={sparse_as_dense} traced={traced}"
                emb = tf.Variable(emb0, dtype=tf.float32)
                w = tf.Variable(w0, dtype=tf.float32)
                opt = keras.optimizers.SGD(lr)
                if how == "optimizer":
                    opt = hvdk.DistributedOptimizer(opt, sparse_as_dense=sparse_as_dense)

                def sparse_step(ids, x):
                    with tf.GradientTape() as tape:
                        loss = _loss(emb, w, ids, x)
                    if how == "tape":
                        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense)
                    grads = tape.gradient(loss, [emb, w])
                    sparse = isinstance(grads[0], tf.IndexedSlices)
                    opt.apply_gradients(zip(grads, [emb, w]))
                    return sparse

                run = tf.function(sparse_step) if traced else sparse_step
                want_emb, want_w = emb0, w0
                for s in range(3):
                    ids, x = _batch(r, s)
                    sparse = run(tf.constant(ids), tf.constant(x))
                    if how == "tape":
                        assert bool(sparse) == (not sparse_as_dense), (what, sparse)
                    want_emb, want_w = _reference_step(
                        want_emb, want_w, [_batch(q, s) for q in range(n)], lr
                    )
                    assert np.allclose(emb.numpy(), want_emb, atol=1e-5), (what, s)
                    assert np.allclose(w.numpy(), want_w, atol=1e-5), (what, s)
