"""Keras scenarios written against `tf.keras`, so that test_keras_flavours.py runs them twice:
with Keras 3, and with Keras 2 (tf_keras, TF_USE_LEGACY_KERAS=1 in the environment). Each
scenario checks what one rank can check against a reference it computes itself from every
rank's regenerated data, prints "OK <scenario> rank=<r>", and prints
"DIGEST <scenario> rank=<r> <what>=<sha256>" lines that the test compares across ranks.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import horovod.tensorflow as hvd_tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402
from tests.support import scenario  # noqa: E402
from tests.support.digests import digest, report  # noqa: E402

K = tf.keras
LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") == "1"


def check(cond, msg):
    if not cond:
        raise AssertionError(f"rank {hvd.rank()}: {msg}")


def data(rank, n, salt=0):
    x = np.random.default_rng(1000 * rank + salt).normal(size=(n, 8)).astype("float32")
    teacher = np.random.default_rng(7).normal(size=(8, 3))
    return x, np.argmax(x @ teacher, axis=1).astype("int32")


def mlp():
    return K.Sequential(
        [K.Input((8,)), K.layers.Dense(16, activation="relu"), K.layers.Dense(3, name="head")]
    )


def sc_flavour():
    """hvd follows tf.keras: tf_keras classes under TF_USE_LEGACY_KERAS=1, Keras 3 otherwise."""
    module = K.layers.Layer.__module__
    check(module.startswith("tf_keras") == LEGACY, f"tf.keras layers come from {module}")
    check(issubclass(hvd.callbacks.MetricAverageCallback, K.callbacks.Callback), "callback base")
    check(issubclass(hvd_tf.SyncBatchNormalization, K.layers.BatchNormalization), "sync BN base")


def optimizers():
    """The optimizer families of this flavour: tf_keras has its current and its legacy one."""
    found = [("sgd", lambda lr: K.optimizers.SGD(lr, momentum=0.9))]
    if LEGACY:
        found.append(("legacy_adam", lambda lr: K.optimizers.legacy.Adam(lr * 0.1)))
    return found


def sc_fit():
    """model.fit with DistributedOptimizer + BroadcastGlobalVariablesCallback +
    MetricAverageCallback + LearningRateWarmupCallback from rank-specific initial weights and
    data, for each optimizer family: the optimizer keeps its class, the model learns, the
    logged loss is the mean over ranks, the final learning rate is the target; weights are
    digested for the test."""
    n, r = hvd.size(), hvd.rank()
    for kind, make in optimizers():
        K.utils.set_random_seed(100 + r)
        x, y = data(r, 96)
        model = mlp()
        plain = make(0.05 * n)
        opt = hvd.DistributedOptimizer(plain)
        check(isinstance(opt, type(plain)) and type(opt).__name__ == type(plain).__name__, kind)
        model.compile(
            opt, K.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
        )
        callbacks = [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback(),
            hvd.callbacks.LearningRateWarmupCallback(0.05 * n, warmup_epochs=1),
        ]
        hist = model.fit(x, y, batch_size=16, epochs=3, callbacks=callbacks, verbose=0).history
        check(hist["accuracy"][-1] > 0.6, f"{kind}: did not learn: {hist}")
        check(abs(hist["learning_rate"][-1] - 0.05 * n) < 1e-6, f"{kind}: lr {hist}")
        everyone = hvd.allgather_object(hist["loss"][-1], name=f"fit.{kind}.loss")
        check(len(set(everyone)) == 1, f"{kind}: averaged loss differs across ranks: {everyone}")
        report(f"fit_{kind}", weights=digest(model.get_weights()))


def sc_load_model():
    """model.save of a model trained with DistributedOptimizer, then hvd.load_model: the
    optimizer is its plain class wrapped again (same name, restored iterations), and training
    continues with equal weights on all ranks."""
    n, r = hvd.size(), hvd.rank()
    for kind, make in optimizers():
        # tf_keras' .keras format does not keep a legacy optimizer's state; its HDF5 one does.
        ext = "h5" if kind.startswith("legacy") else "keras"
        path = os.path.join(os.environ["HVD_KERAS_TMPDIR"], f"model_{kind}_{r}.{ext}")
        K.utils.set_random_seed(5)
        x, y = data(r, 64, salt=3)
        model = mlp()
        model.compile(
            hvd.DistributedOptimizer(make(0.02 * n)),
            K.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        iterations = int(model.optimizer.iterations.numpy())
        model.save(path)
        plain = K.models.load_model(path)
        check(type(plain.optimizer).__mro__[1].__module__.split(".")[0] != "horovod", kind)
        loaded = hvd.load_model(path)
        opt = loaded.optimizer
        check(hasattr(opt, "register_local_var"), f"{kind}: load_model did not wrap {type(opt)}")
        check(type(opt).__name__ == type(plain.optimizer).__name__, f"{kind}: class name")
        check(int(opt.iterations.numpy()) == iterations, f"{kind}: iterations not restored")
        loaded.fit(x, y, batch_size=16, epochs=1, verbose=0)
        check(int(opt.iterations.numpy()) == 2 * iterations, f"{kind}: not trained on")
        report(f"load_model_{kind}", weights=digest(loaded.get_weights()))


def sc_accumulate():
    """backward_passes_per_step=2 (average_aggregated_gradients=True) in model.fit, for each
    optimizer family (plain SGD: the update is lr times the gradient): a linear model without
    bias under MSE ends where a NumPy reference does (every 2 batches, the mean over ranks of
    each rank's mean of its 2 gradients, taken at the window's starting weights) and
    `iterations` counts applied updates."""
    n, r, lr, batch, steps = hvd.size(), hvd.rank(), 0.05, 4, 4
    w0 = np.random.default_rng(3).normal(size=(3, 1)).astype("float32")

    def shard(q):
        x = np.random.default_rng(60 + q).normal(size=(batch * steps, 3)).astype("float32")
        return x, x @ np.array([[1.0], [-2.0], [0.5]], "float32")

    shards = [shard(q) for q in range(n)]
    w = w0.astype("float64")
    for start in range(0, steps, 2):
        g = np.zeros_like(w)
        for x, y in shards:
            for s in range(start, start + 2):
                xb, yb = x[s * batch : (s + 1) * batch], y[s * batch : (s + 1) * batch]
                g += 2.0 / batch * xb.T @ (xb @ w - yb) / 2
        w -= lr * g / n
    families = [("sgd", K.optimizers.SGD)] + ([("legacy_sgd", K.optimizers.legacy.SGD)] * LEGACY)
    for kind, make in families:
        model = K.Sequential([K.Input((3,)), K.layers.Dense(1, use_bias=False)])
        model.set_weights([w0])
        opt = hvd.DistributedOptimizer(
            make(lr), backward_passes_per_step=2, average_aggregated_gradients=True
        )
        model.compile(opt, "mse")
        model.fit(*shards[r], batch_size=batch, shuffle=False, epochs=1, verbose=0)
        check(int(opt.iterations.numpy()) == steps // 2, f"{kind}: {opt.iterations.numpy()}")
        got = model.get_weights()[0]
        check(np.allclose(got, w, atol=1e-5), f"{kind}: {got.ravel()} != {w.ravel()}")
        report(f"accumulate_{kind}", weights=digest([got]))


def sc_partial_optimizer():
    """PartialDistributedOptimizer with the head as local layer in model.fit (the broadcast
    callback leaves the head out via register_local_var): after training on rank-specific data
    the body is equal on all ranks and the head differs."""
    r = hvd.rank()
    K.utils.set_random_seed(11 + r)
    x, y = data(r, 64, salt=5)
    model = mlp()
    head = model.get_layer("head")
    opt = hvd.PartialDistributedOptimizer(K.optimizers.SGD(0.05), local_layers=[head])
    model.compile(opt, K.losses.SparseCategoricalCrossentropy(from_logits=True))
    bcast = hvd.callbacks.BroadcastGlobalVariablesCallback(0)
    for v in head.trainable_weights:
        bcast.register_local_var(v)
    model.fit(x, y, batch_size=16, epochs=2, callbacks=[bcast], verbose=0)
    body = [w for layer in model.layers if layer is not head for w in layer.get_weights()]
    report("partial_optimizer", shared=digest(body), local=digest(head.get_weights()))


def sc_partial_tape():
    """PartialDistributedGradientTape(local_layers=[head]): the body's gradients are the mean
    over ranks, the head's are this rank's own divided by the number of ranks (upstream's
    scale_local_gradients); get_local_and_global_gradients splits them; after training steps
    in a tf.function the body is equal across ranks and the head differs."""
    n, r = hvd.size(), hvd.rank()
    K.utils.set_random_seed(21)
    model = mlp()
    head = model.get_layer("head")
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = data(r, 32, salt=7)
    variables = model.trainable_variables

    def local_grads(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return [g.numpy() for g in tape.gradient(loss, variables)]

    with tf.GradientTape() as plain:
        loss = loss_fn(y, model(x, training=True))
    tape = hvd_tf.PartialDistributedGradientTape(plain, local_layers=head)
    got = [g.numpy() for g in tape.gradient(loss, variables)]
    everyone = [local_grads(*data(q, 32, salt=7)) for q in range(n)]
    local_ids = {id(v) for v in head.trainable_weights}
    for i, v in enumerate(variables):
        want = everyone[r][i] / n if id(v) in local_ids else np.mean([e[i] for e in everyone], 0)
        check(np.allclose(got[i], want, atol=1e-6), f"gradient of {v.name}")

    with tf.GradientTape() as plain:
        loss = loss_fn(y, model(x, training=True))
    tape = hvd_tf.PartialDistributedGradientTape(plain, local_layers=[head])
    local, shared = tape.get_local_and_global_gradients(loss, variables)
    check(len(local) == 2 and all(id(s) in local_ids for s, _ in local), "local split")
    check(len(shared) == len(variables) - 2, "global split")

    opt = K.optimizers.SGD(0.1)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as plain:
            loss = loss_fn(y, model(x, training=True))
        tape = hvd_tf.PartialDistributedGradientTape(plain, local_layers=[head])
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

    for _ in range(3):
        step(x, y)
    body = [w for layer in model.layers if layer is not head for w in layer.get_weights()]
    report("partial_tape", shared=digest(body), local=digest(head.get_weights()))


SCENARIOS = scenario.collect(
    sys.modules[__name__], *scenario.beside(__file__, "scenarios_sync_batch_norm.py")
)

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
