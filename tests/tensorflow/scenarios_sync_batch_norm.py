"""hvd.SyncBatchNormalization scenarios (run by scenarios_keras_flavours.py, in both Kerases):
every rank's batch has a different size (rank r: 3 + 2 r rows, 0 rows on one rank for the
empty-batch case), and each rank checks the layer against tf.keras' own BatchNormalization
applied, in this one process, to the concatenation of every rank's batch (regenerated here).
"""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd

K = tf.keras
TOL = 1e-5


def check(cond, msg):
    if not cond:
        raise AssertionError(f"rank {hvd.rank()}: {msg}")


def batch(rank, step, rows, shape):
    """Rank `rank`'s batch at `step`: offset and scaled, so the variance's subtraction matters."""
    g = np.random.default_rng(100 * step + rank)
    return (g.normal(size=(rows,) + shape) * (1.0 + rank) + 3.0).astype("float32")


def rows_of(rank):
    return 3 + 2 * rank


def reference():
    """Keras' own layer; in tf_keras unfused, as SyncBatchNormalization is (tf_keras' fused
    kernel updates the moving variance with the unbiased, n / (n - 1), batch variance)."""
    legacy = K.layers.Layer.__module__.startswith("tf_keras")
    return K.layers.BatchNormalization(momentum=0.5, **({"fused": False} if legacy else {}))


def close(a, b, what):
    err = float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) if np.size(a) else 0.0
    check(err <= TOL, f"{what}: differs from the global batch norm by {err}")


def compare_steps(call, steps, shape, rows=rows_of, name="sync_bn"):
    """Runs `call(layer, x)` on this rank's batches for `steps` steps, the reference on the
    global batches; compares this rank's rows of the output and the moving statistics.
    name=None: Keras' automatic, per-process layer name."""
    n, r = hvd.size(), hvd.rank()
    sync = hvd.SyncBatchNormalization(momentum=0.5, name=name)
    ref = reference()
    for step in range(steps):
        parts = [batch(q, step, rows(q), shape) for q in range(n)]
        out = call(sync, parts[r])
        want = ref(np.concatenate(parts), training=True).numpy()
        start = sum(rows(q) for q in range(r))
        close(out, want[start : start + rows(r)], f"output at step {step}")
    close(sync.moving_mean.numpy(), ref.moving_mean.numpy(), "moving mean")
    close(sync.moving_variance.numpy(), ref.moving_variance.numpy(), "moving variance")
    # Inference uses the moving statistics, as Keras' own layer does.
    x = batch(r, 99, 4, shape)
    close(sync(x, training=False), ref(x, training=False), "inference output")


def sc_sync_bn_eager():
    """Eagerly, on (rows, 5) and on (rows, 3, 4, 2) images (statistics per last channel)."""
    compare_steps(lambda layer, x: layer(x, training=True).numpy(), 3, (5,))
    compare_steps(lambda layer, x: layer(x, training=True).numpy(), 2, (3, 4, 2))


def sc_sync_bn_function():
    """Inside a tf.function (one trace per batch shape: the ranks' shapes differ)."""

    def call(layer, x):
        @tf.function
        def run(x):
            return layer(x, training=True)

        return run(tf.constant(x)).numpy()

    compare_steps(call, 3, (5,))


def sc_sync_bn_empty_rank():
    """A rank with an empty batch contributes nothing: the others' statistics are those of
    their batches together (eager)."""
    compare_steps(
        lambda layer, x: layer(x, training=True).numpy(),
        2,
        (5,),
        rows=lambda q: 0 if q == 1 else rows_of(q),
    )


def sc_sync_bn_gradients():
    """Gradients through the global statistics: with rank r's loss sum(out_r * c_r), the
    gradient of this rank's loss with respect to its own inputs (the allreduce's gradient
    carries the other ranks' losses' dependence on the statistics) equals the gradient of the
    total loss over the global batch norm with respect to these rows; the sum over ranks of
    the gamma and beta gradients equals the reference's."""
    n, r, shape = hvd.size(), hvd.rank(), (5,)
    parts = [batch(q, 7, rows_of(q), shape) for q in range(n)]
    weights = [
        np.random.default_rng(40 + q).normal(size=p.shape).astype("float32")
        for q, p in enumerate(parts)
    ]
    # Upstream's signature (issue 42, class 5): fused=False (or 0, None) accepted in either
    # Keras, also through a config; fused=True refused as upstream refuses it.
    sync, ref = hvd.SyncBatchNormalization(fused=False), reference()
    for ok in (0, None):
        hvd.SyncBatchNormalization(fused=ok)
    hvd.SyncBatchNormalization.from_config({**sync.get_config(), "fused": False})
    try:
        hvd.SyncBatchNormalization(fused=True)
        raise AssertionError("fused=True was accepted")
    except ValueError as e:
        check("fused=True" in str(e), e)
    x = tf.constant(parts[r])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(sync(x, training=True) * weights[r])
    gx, gg, gb = tape.gradient(loss, [x, sync.gamma, sync.beta])
    xs = tf.constant(np.concatenate(parts))
    with tf.GradientTape() as tape:
        tape.watch(xs)
        total = tf.reduce_sum(ref(xs, training=True) * np.concatenate(weights))
    rx, rg, rb = tape.gradient(total, [xs, ref.gamma, ref.beta])
    start = sum(rows_of(q) for q in range(r))
    close(gx, rx.numpy()[start : start + rows_of(r)], "input gradient")
    summed = hvd.allreduce(tf.stack([gg, gb]), op=hvd.Sum, name="sync_bn_gradients.params")
    close(summed, np.stack([rg, rb]), "gamma and beta gradients")


def sc_sync_bn_fit():
    """model.fit of Sequential([SyncBatchNormalization]) with learning rate 0 and unequal
    batch sizes per rank: the moving statistics after 3 steps equal those of Keras'
    BatchNormalization called on the 3 global batches; gamma and beta get equal gradients on
    every rank (checked by training one step with lr > 0: equal weights)."""
    n, r = hvd.size(), hvd.rank()
    model, x = fit_moving_statistics()
    model.compile(hvd_keras().DistributedOptimizer(K.optimizers.SGD(0.1)), "mse")
    target = np.ones_like(x)
    model.fit(x, target, batch_size=rows_of(r), shuffle=False, epochs=1, verbose=0)
    weights = np.concatenate([w.ravel() for w in model.get_weights()])
    everyone = hvd.allgather(tf.constant(weights[None]), name="sync_bn_fit.weights").numpy()
    check(np.array_equal(everyone, np.repeat(weights[None], n, 0)), "weights differ")


def sc_sync_bn_auto_names():
    """Issue 54, class 12: rank 1 builds one SyncBatchNormalization more (unused) first, so its
    layers' automatic names ("sync_batch_normalization_3") differ from the other ranks'; the
    allreduce must not be named after them. Eagerly (before: every rank waited for ever for the
    others' "SyncBatchNormalization.<layer name>"), in a tf.function, and in model.fit, eager
    and traced: the statistics are the global batch's on every rank. Run last in a batch: the
    later scenarios' automatic names would be shifted on rank 1 too."""
    if hvd.rank() == 1:
        hvd.SyncBatchNormalization()
    probe = hvd.SyncBatchNormalization()
    names = hvd.allgather_object(probe.name, name="sync_bn_auto_names.names")
    check(hvd.size() == 1 or len(set(names)) > 1, f"the ranks' layer names agree: {names}")
    compare_steps(lambda layer, x: layer(x, training=True).numpy(), 2, (5,), name=None)

    def traced(layer, x):
        return tf.function(lambda x: layer(x, training=True))(tf.constant(x)).numpy()

    compare_steps(traced, 2, (5,), name=None)
    for run_eagerly in (True, False):
        fit_moving_statistics(run_eagerly)


def fit_moving_statistics(run_eagerly=False, steps=3, shape=(6,)):
    """model.fit of Sequential([SyncBatchNormalization]) (automatic name) with learning rate 0
    and unequal batch sizes per rank: the moving statistics after `steps` steps equal those of
    Keras' BatchNormalization called on the global batches. Returns the model and the data."""
    n, r = hvd.size(), hvd.rank()
    x = np.concatenate([batch(r, s, rows_of(r), shape) for s in range(steps)])
    model = K.Sequential([K.Input(shape), hvd.SyncBatchNormalization(momentum=0.5)])
    model.compile(
        hvd_keras().DistributedOptimizer(K.optimizers.SGD(0.0)), "mse", run_eagerly=run_eagerly
    )
    model.fit(x, np.zeros_like(x), batch_size=rows_of(r), shuffle=False, epochs=1, verbose=0)
    ref = reference()
    for s in range(steps):
        ref(np.concatenate([batch(q, s, rows_of(q), shape) for q in range(n)]), training=True)
    layer = model.layers[-1]
    how = "eager fit" if run_eagerly else "fit"
    close(layer.moving_mean.numpy(), ref.moving_mean.numpy(), f"{how} moving mean")
    close(layer.moving_variance.numpy(), ref.moving_variance.numpy(), f"{how} moving variance")
    return model, x


def hvd_keras():
    import horovod.tensorflow.keras as hvd_keras

    return hvd_keras
