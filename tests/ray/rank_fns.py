"""Functions the tests run in the workers (a module of their own: cloudpickle sends them by
reference, and the actors import it from the tree)."""

import os

from tests.support.launched import rank_view  # noqa: F401  (the tests run it from here)


def raise_on_rank(bad_rank):
    """Rank `bad_rank` raises; the others enter a collective that cannot complete without it."""
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    if hvd.rank() == bad_rank:
        fail_here(bad_rank)
    hvd.allreduce(np.ones(4), op=hvd.Sum, name="never.complete")
    return "finished"


def fail_here(rank):
    raise ValueError(f"fn failed on purpose on rank {rank}")


def init_and_shutdown():
    import horovod.numpy as hvd

    hvd.init()
    rank = hvd.rank()
    hvd.shutdown()
    return rank, os.getpid()


class Counter:
    """An executable: state kept in the actor between calls."""

    def __init__(self, start, step=1):
        self.value = start
        self.step = step

    def bump(self):
        self.value += self.step
        return self.value


def keras_train(epochs):
    """A tiny Keras model trained with hvd.DistributedOptimizer; the ranks' weights after."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    import horovod.tensorflow.keras as hvd

    hvd.init()
    keras.utils.set_random_seed(hvd.rank())  # different initial weights: the broadcast aligns them
    rng = np.random.default_rng(hvd.rank())
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05))
    model.compile(optimizer=opt, loss="mse")
    model.fit(
        x, y, batch_size=16, epochs=epochs, verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )  # fmt: skip
    return hvd.rank(), [w.tolist() for w in model.get_weights()]


def elastic_count(steps, log_dir, step_seconds=0.2, fail_at=None):
    """An elastic job over horovod.numpy (ObjectState + the common elastic loop): `steps`
    steps, each an allreduce of ones (= the world's size) added to state.total and a commit.
    Each step of each rank appends "time generation rank size step pid" to log_dir/steps.log (the
    tests read from it when training went on, and at what size). fail_at=(rank, step): that
    rank raises a ValueError there (fn's own error). Returns (rank, size, state's values)."""
    import functools
    import time

    import numpy as np

    import horovod.numpy as hvd
    from horovod.common.elastic import ObjectState, run_fn

    hvd.init()
    state = ObjectState(hvd.broadcast_object, hvd.rank, step=0, total=0.0, sizes=[])
    generation = os.environ.get("HOROVOD_ELASTIC_GENERATION", "-")

    @functools.partial(run_fn, reset=lambda: None)
    def train(state):
        while state.step < steps:
            if fail_at == (hvd.rank(), state.step):
                fail_here(hvd.rank())
            size = hvd.allreduce(np.ones(1), op=hvd.Sum, name="elastic.count")[0]
            state.total += float(size)
            state.sizes = state.sizes + [int(size)]
            state.step += 1
            with open(os.path.join(log_dir, "steps.log"), "a") as f:
                row = (time.time(), generation, hvd.rank(), hvd.size(), state.step, os.getpid())
                f.write(" ".join(str(x) for x in row) + "\n")
            state.commit()
            time.sleep(step_seconds)
        return hvd.rank(), hvd.size(), dict(step=state.step, total=state.total, sizes=state.sizes)

    return train(state)


def allreduce_loop(log_dir, steps=600, step_seconds=0.1):
    """Allreduces until `steps`, logging "time rank step pid" per step to log_dir/loop.log
    (the fault tests act once it runs); the steps it made."""
    import time

    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    for step in range(steps):
        hvd.allreduce(np.ones(4), op=hvd.Sum, name="loop")
        with open(os.path.join(log_dir, "loop.log"), "a") as f:
            f.write(f"{time.time()} {hvd.rank()} {step} {os.getpid()}\n")
        time.sleep(step_seconds)
    return steps


def gpu_view():
    """A rank's GPU view: CUDA_VISIBLE_DEVICES, its local rank, the ids Ray gave its actor."""
    import ray

    import horovod.numpy as hvd

    hvd.init()
    return {
        "rank": hvd.rank(),
        "local_rank": hvd.local_rank(),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "ray_gpu_ids": [str(i) for i in ray.get_gpu_ids()],
        "node": ray.get_runtime_context().get_node_id(),
    }


def keras_elastic(steps, log_dir, step_seconds=0.2):
    """An elastic Keras job: a tiny model trained with DistributedGradientTape, its weights
    and optimizer in a TensorFlowKerasState committed each step (logged as elastic_count
    does). Returns (rank, size, step, the weights as lists)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import time

    import keras
    import numpy as np
    import tensorflow as tf

    import horovod.tensorflow as hvd

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()
    keras.utils.set_random_seed(hvd.rank())  # different weights: the state's sync aligns them
    rng = np.random.default_rng(7)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.05)
    opt.build(model.trainable_variables)
    generation = os.environ.get("HOROVOD_ELASTIC_GENERATION", "-")

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            train_step()
            state.step += 1
            with open(os.path.join(log_dir, "steps.log"), "a") as f:
                row = (time.time(), generation, hvd.rank(), hvd.size(), state.step, os.getpid())
                f.write(" ".join(str(x) for x in row) + "\n")
            state.commit()
            time.sleep(step_seconds)
        return hvd.rank(), hvd.size(), state.step, [w.tolist() for w in model.get_weights()]

    return train(hvd.elastic.TensorFlowKerasState(model, opt, step=0))


def internal_error_outside_elastic_run():
    """Every rank raises HorovodInternalError (a lost peer's error) outside hvd.elastic.run,
    with no peer lost: an elastic job must end on it rather than re-form again and again."""
    import horovod.numpy as hvd
    from horovod.common.exceptions import HorovodInternalError

    hvd.init()
    raise HorovodInternalError(f"rank {hvd.rank()}: a peer's error with no peer lost")
