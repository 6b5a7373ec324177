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
