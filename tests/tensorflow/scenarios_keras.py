"""Keras scenarios run on every rank under mpirun by test_keras.py.

Each scenario checks what a single rank can check itself (against a NumPy reference that
every rank computes from every rank's regenerated data) and prints
"OK <scenario> rank=<r>"; cross-rank equality is checked by the test from the
"DIGEST <scenario> rank=<r> <what>=<sha256>" lines each rank prints. A failed check raises,
so the rank exits non-zero.
"""

import hashlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# Two cores are shared by all ranks: one thread per op keeps ranks from starving each other.
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402
from horovod.tensorflow import reduction as hvd_reduction  # noqa: E402
from tests.support import scenario  # noqa: E402
from tests.support.digests import digest, report  # noqa: E402


def check(cond, msg):
    if not cond:
        raise AssertionError(f"rank {hvd.rank()}: {msg}")


def classification_data(rank, n, salt=0):
    """Rank-specific inputs; labels from one fixed teacher, so every shard is learnable."""
    x = np.random.default_rng(1000 * rank + salt).normal(size=(n, 8)).astype("float32")
    teacher = np.random.default_rng(7).normal(size=(8, 3))
    return x, np.argmax(x @ teacher, axis=1).astype("int32")


def mlp():
    return keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]
    )


class LrRecorder(keras.callbacks.Callback):
    """The learning rate each batch runs with (runs after the schedule callbacks)."""

    def __init__(self):
        super().__init__()
        self.epoch, self.lrs = 0, []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        self.lrs.append((self.epoch, batch, lr))


# ---- fit: DistributedOptimizer + the callbacks ---------------------------------------------


def sc_fit():
    """model.fit from rank-specific initial weights and data: afterwards weights and logged
    metrics are equal on all ranks (digests), val_loss is the mean of the ranks' own
    val losses, and the warmup schedule is the documented formula."""
    n, r = hvd.size(), hvd.rank()
    keras.utils.set_random_seed(100 + r)  # different initial weights: the broadcast matters
    x, y = classification_data(r, 96)
    xv, yv = classification_data(r, 32, salt=1)
    model = mlp()
    base_lr, warmup_epochs, batch = 0.05 * n, 2, 16
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(base_lr, momentum=0.9))
    check(
        isinstance(opt, keras.optimizers.SGD) and type(opt).__name__ == "SGD",
        f"wrapped optimizer is a {type(opt).__mro__}",
    )
    model.compile(
        optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(True), metrics=["accuracy"]
    )
    recorder = LrRecorder()
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(base_lr, warmup_epochs=warmup_epochs),
        recorder,
    ]
    hist = model.fit(
        x, y, batch_size=batch, epochs=3, validation_data=(xv, yv), callbacks=callbacks, verbose=0
    ).history
    check(
        model.optimizer is opt and isinstance(model.optimizer, keras.optimizers.SGD),
        "model.optimizer changed class",
    )

    # The warmup formula of LearningRateWarmupCallback's docstring, batch by batch.
    steps = len(x) // batch
    check(len(recorder.lrs) == 3 * steps, f"recorded {len(recorder.lrs)} batches")
    for e, b, lr in recorder.lrs:
        want = (
            base_lr / n * ((e + (b + 1) / steps) * (n - 1) / warmup_epochs + 1)
            if e < warmup_epochs
            else base_lr
        )
        check(abs(lr - want) <= 1e-6 * base_lr, f"lr at epoch {e} batch {b}: {lr} != {want}")
    check(abs(recorder.lrs[-1][2] - base_lr) < 1e-6, "lr after warmup is not initial_lr")

    # MetricAverageCallback: the logged val_loss is the mean of every rank's own val_loss.
    local = model.evaluate(xv, yv, verbose=0, return_dict=True)["loss"]
    mean = float(hvd.allreduce(np.float64(local), name="fit.val_loss").numpy())
    check(abs(hist["val_loss"][-1] - mean) < 1e-5, f"val_loss {hist['val_loss'][-1]} != {mean}")
    check(hist["accuracy"][-1] > 0.6, f"did not learn: {hist}")

    history = [np.float64(v) for k in sorted(hist) for v in hist[k]]
    report(
        "fit",
        weights=digest(model.get_weights()),
        history=digest(history),
        optimizer=digest([v.numpy() for v in opt.variables]),
        keys=hashlib.sha256(json.dumps(sorted(hist)).encode()).hexdigest(),
    )


# ---- backward_passes_per_step --------------------------------------------------------------


def linear_data(rank, n):
    x = np.random.default_rng(50 + rank).normal(size=(n, 4))
    return x, x @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.7


def mse_grads(w, b, x, y):
    """Gradients of Keras' MSE (mean over the batch) for y_hat = x w + b."""
    err = x @ w + b - y
    return 2.0 / len(x) * x.T @ err, 2.0 / len(x) * err.sum(0)


def accumulate_reference(batches_per_rank, w, b, lr, k, average):
    """Plain-NumPy SGD: every k passes, the mean over ranks of each rank's sum (or mean) of
    its k gradients, all taken at the weights of the window's start."""
    steps = len(batches_per_rank[0])
    for start in range(0, steps - steps % k, k):
        gw, gb = np.zeros_like(w), np.zeros_like(b)
        for batches in batches_per_rank:
            for x, y in batches[start : start + k]:
                dw, db = mse_grads(w, b, x, y)
                gw, gb = gw + dw, gb + db
        scale = len(batches_per_rank) * (k if average else 1)
        w, b = w - lr * gw / scale, b - lr * gb / scale
    return w, b


def sc_accumulate():
    """backward_passes_per_step=2: eagerly, weights and iterations change only on every 2nd
    apply_gradients, one reduction each; in model.fit (tf.function) the result matches the
    NumPy reference for both average_aggregated_gradients settings."""
    n, r, batch = hvd.size(), hvd.rank(), _ACCUMULATE_BATCH
    w0 = np.random.default_rng(3).normal(size=(4, 1)) * 0.1
    b0 = np.zeros(1)
    data = [linear_data(q, 4 * batch) for q in range(n)]
    batches = [
        [(x[i : i + batch], y[i : i + batch]) for i in range(0, len(x), batch)] for x, y in data
    ]
    for average in (False, True):
        want = accumulate_reference(batches, w0, b0, _ACCUMULATE_LR, _ACCUMULATE_K, average)
        _accumulate_eager(batches[r], w0, b0, average, want)
        _accumulate_fit(data[r], len(batches[r]), w0, b0, average, want)


# sc_accumulate's backward_passes_per_step, learning rate and batch size
_ACCUMULATE_K, _ACCUMULATE_LR, _ACCUMULATE_BATCH = 2, 0.05, 8


def _accumulating_sgd(average):
    return hvd.DistributedOptimizer(
        keras.optimizers.SGD(_ACCUMULATE_LR),
        backward_passes_per_step=_ACCUMULATE_K,
        average_aggregated_gradients=average,
    )


def _accumulate_eager(batches, w0, b0, average, want):
    """A custom loop over this rank's batches: weights and iterations change on every k-th
    step only, with one reduction each, and end at the reference `want`."""
    k = _ACCUMULATE_K
    calls = []
    real_reduce = hvd_reduction.reduce_gradients

    def counting_reduce(*args, **kwargs):  # a spy: the real collective still runs
        calls.append(1)
        return real_reduce(*args, **kwargs)

    layer = keras.layers.Dense(1)
    layer.build((None, 4))
    layer.set_weights([w0.astype("float32"), b0.astype("float32")])
    opt = _accumulating_sgd(average)
    hvd_reduction.reduce_gradients = counting_reduce
    try:
        for step, (x, y) in enumerate(batches, 1):
            before = [v.numpy().copy() for v in layer.weights]
            with tf.GradientTape() as tape:
                loss = keras.losses.mean_squared_error(y, layer(x.astype("float32")))
                loss = tf.reduce_mean(loss)
            opt.apply_gradients(zip(tape.gradient(loss, layer.weights), layer.weights))
            changed = any(not np.array_equal(a, v.numpy()) for a, v in zip(before, layer.weights))
            check(changed == (step % k == 0), f"step {step}: weights changed={changed}")
            check(
                int(opt.iterations.numpy()) == step // k,
                f"step {step}: iterations={int(opt.iterations.numpy())}",
            )
        check(len(calls) == len(batches) // k, f"{len(calls)} reductions")
    finally:
        hvd_reduction.reduce_gradients = real_reduce
    want_w, want_b = want
    got_w, got_b = layer.get_weights()
    check(
        np.allclose(got_w, want_w, atol=1e-5) and np.allclose(got_b, want_b, atol=1e-5),
        f"eager average={average}: {got_w.ravel()} {got_b} != {want_w.ravel()} {want_b}",
    )


def _accumulate_fit(data, batch_count, w0, b0, average, want):
    """model.fit on this rank's data (batch_count batches): the tf.cond path inside the traced
    train step ends at the reference `want`."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.set_weights([w0.astype("float32"), b0.astype("float32")])
    opt = _accumulating_sgd(average)
    model.compile(optimizer=opt, loss="mse")
    x, y = data
    model.fit(
        x.astype("float32"),
        y.astype("float32"),
        batch_size=_ACCUMULATE_BATCH,
        epochs=1,
        shuffle=False,
        verbose=0,
    )
    want_w, want_b = want
    got_w, got_b = model.get_weights()
    check(
        np.allclose(got_w, want_w, atol=1e-5) and np.allclose(got_b, want_b, atol=1e-5),
        f"fit average={average}: {got_w.ravel()} {got_b} != {want_w.ravel()} {want_b}",
    )
    check(int(opt.iterations.numpy()) == batch_count // _ACCUMULATE_K, "fit iterations")
    report(f"accumulate.{average}", weights=digest(model.get_weights()))


# ---- save / load_model ---------------------------------------------------------------------


@keras.saving.register_keras_serializable(package="hvdtest")
class MySGD(keras.optimizers.SGD):
    """A user's optimizer class: registered, so plain Keras can load it by name."""


def barrier():
    hvd.allreduce(np.zeros(1), name="barrier")


def sc_save_load():
    """model.save() of a model with a DistributedOptimizer loads in plain Keras with the plain
    class; hvd.load_model re-wraps (same state, still an instance of the class) and training
    continues identically on all ranks. horovod.keras is horovod.tensorflow.keras."""
    import horovod.keras
    import horovod.keras.callbacks
    import horovod.tensorflow.keras.callbacks

    check(
        horovod.keras is hvd
        and horovod.keras.callbacks is hvd.callbacks
        and horovod.tensorflow.keras.callbacks is hvd.callbacks,
        "horovod.keras is not the module",
    )

    tmpdir = os.environ["HVD_KERAS_TMPDIR"]  # shared by the ranks (one host)
    r = hvd.rank()
    x, y = classification_data(r, 48)
    keras.utils.set_random_seed(r)
    for base in (keras.optimizers.Adam(0.01), MySGD(0.05, momentum=0.5)):
        cls = type(base)
        path = os.path.join(tmpdir, f"{cls.__name__}.keras")
        model = mlp()
        opt = hvd.DistributedOptimizer(base)
        again = hvd.DistributedOptimizer(opt, compression=hvd.Compression.fp16)
        check(type(again) is type(opt), "re-wrapping nests classes")
        model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(True))
        model.fit(
            x,
            y,
            batch_size=16,
            epochs=1,
            verbose=0,
            callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
        )
        if r == 0:
            model.save(path)
        barrier()

        plain = keras.models.load_model(path)
        check(type(plain.optimizer) is cls, f"plain load gave {type(plain.optimizer)}")
        loaded = hvd.load_model(path, custom_optimizers=[cls])
        lopt = loaded.optimizer
        check(
            isinstance(lopt, cls) and type(lopt) is not cls and type(lopt).__name__ == cls.__name__,
            f"hvd.load_model gave {type(lopt).__mro__}",
        )
        want = [v.numpy() for v in opt.variables]
        got = [v.numpy() for v in lopt.variables]
        # Rank 0 saved its own state; the others must match it after training on all ranks.
        check(
            len(want) == len(got) and all(np.array_equal(a, b) for a, b in zip(want, got)),
            "optimizer state differs after load",
        )
        check(
            all(np.array_equal(a, b) for a, b in zip(model.get_weights(), loaded.get_weights())),
            "weights differ",
        )
        loaded.fit(x, y, batch_size=16, epochs=1, verbose=0)
        check(int(lopt.iterations.numpy()) == 2 * len(x) // 16, "iterations not continued")
        report(f"save_load.{cls.__name__}", weights=digest(loaded.get_weights()))
        barrier()

    try:
        hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
        raise AssertionError("a tf.compat.v1 optimizer was accepted")
    except TypeError:
        pass


def sc_schedule_checkpoint():
    """LearningRateScheduleCallback (staircase, from epoch 1) sets initial_lr * 0.5**epoch at
    each epoch's first batch and leaves epoch 0 alone; BestModelCheckpoint (after
    MetricAverageCallback) writes only on rank 0, a model that loads."""
    r = hvd.rank()
    path = os.path.join(os.environ["HVD_KERAS_TMPDIR"], f"best_rank{r}.keras")
    x, y = classification_data(r, 32)
    xv, yv = classification_data(r, 16, salt=1)
    model = mlp()
    model.compile(
        optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)),
        loss=keras.losses.SparseCategoricalCrossentropy(True),
    )
    recorder = LrRecorder()
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateScheduleCallback(0.2, lambda e: 0.5**e, start_epoch=1),
        hvd.callbacks.BestModelCheckpoint(monitor="val_loss", filepath=path),
        recorder,
    ]
    model.fit(
        x, y, batch_size=16, epochs=3, validation_data=(xv, yv), callbacks=callbacks, verbose=0
    )
    for e, b, lr in recorder.lrs:
        want = 0.1 if e == 0 else 0.2 * 0.5**e
        check(abs(lr - want) < 1e-7, f"lr at epoch {e} batch {b}: {lr} != {want}")
    barrier()
    check(
        os.path.exists(path) == (r == 0), f"checkpoint written on rank {r}: {os.path.exists(path)}"
    )
    if r == 0:
        check(isinstance(keras.models.load_model(path), keras.Model), "checkpoint unreadable")


# ---- mixed precision: every rank skips a step with non-finite gradients, or none does ----------


def sc_mixed_precision():
    """mixed_float16: model.compile wraps hvd.DistributedOptimizer in Keras' LossScaleOptimizer,
    and rank 1's second batch of each epoch overflows float16 (its gradients are NaN). Every
    rank must skip those steps together: equal weights, loss scale and update count (8 batches,
    2 skipped). Before: rank 1 skipped its allreduce alone, so from then on the ranks averaged
    gradients of different batches, and the last step waited for ever. The same when the user
    wraps a LossScaleOptimizer in DistributedOptimizer (which then reduces before the check)."""
    r = hvd.rank()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        for how in ("compiled", "wrapped"):
            keras.utils.set_random_seed(3)
            model = mlp()
            sgd = keras.optimizers.SGD(0.05)
            if how == "compiled":
                opt = hvd.DistributedOptimizer(sgd, name=f"mp_{how}")
            else:
                opt = hvd.DistributedOptimizer(
                    keras.optimizers.LossScaleOptimizer(sgd), name=f"mp_{how}"
                )
            model.compile(
                optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            )
            check(
                isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer),
                f"{how}: {type(model.optimizer).__name__}",
            )
            x, y = classification_data(r, 64, salt=5)
            if r == 1:
                x[16:32] = 1e30  # inf in float16: NaN loss and gradients on this rank only
            model.fit(
                x,
                y,
                batch_size=16,
                epochs=2,
                shuffle=False,
                verbose=0,
                callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
            )
            steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
            scale = float(keras.ops.convert_to_numpy(model.optimizer.dynamic_scale))
            check(steps == 6, f"{how}: {steps} updates applied, expected 8 - 2 skipped")
            weights = model.get_weights()
            check(all(np.isfinite(w).all() for w in weights), f"{how}: non-finite weights")
            report(f"mixed_precision_{how}", weights=digest(weights), scale=digest([scale]))
    finally:
        keras.config.set_dtype_policy("float32")


SCENARIOS = scenario.collect(
    sys.modules[__name__],
    *scenario.beside(__file__, "scenarios_keras_join.py", "scenarios_keras_metrics.py"),
)

# A program of its own (not a subject module of scenarios_ops.py): it sets TF's thread pools at
# import, which would change the op scenarios' settings.
if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
