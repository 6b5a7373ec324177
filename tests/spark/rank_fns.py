"""The functions the tests hand to horovod.spark.run. A module of their own, importable by the
executors (PYTHONPATH holds the tree), so that they are pickled by reference and import only
what they use, inside the rank."""

import os
import subprocess
import sys
import time

from tests.support import launched


def identity_and_sum(tag):
    """The rank's view of the job and an allreduce (tests/support/launched.py), then the engine
    shut down, as a training function ends."""
    return launched.rank_view(tag, shutdown=True)


def chatty(lines):
    """Prints `lines` numbered lines on stdout and one on stderr; returns the rank."""
    rank = int(os.environ["HOROVOD_RANK"])
    for i in range(lines):
        print(f"hello {i} from rank {rank}")
    print(f"to stderr from rank {rank}", file=sys.stderr)
    return rank


def fail_on_rank_1(pid_dir, wait_s):
    """Rank 0 starts a grandchild (sleep) and records both pids in pid_dir, then waits in an
    allreduce that rank 1 never joins; rank 1 raises ValueError once rank 0's pids are there."""
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    if hvd.rank() == 0:
        sleeper = subprocess.Popen(["sleep", str(wait_s)])
        with open(os.path.join(pid_dir, "pids.part"), "w") as f:
            f.write(f"{os.getpid()} {sleeper.pid}")
        os.replace(os.path.join(pid_dir, "pids.part"), os.path.join(pid_dir, "pids"))
        time.sleep(wait_s)  # the driver must stop this rank
        hvd.allreduce(np.zeros(1), name="never")
        return "rank 0 was not stopped"
    deadline = time.monotonic() + wait_s
    while not os.path.exists(os.path.join(pid_dir, "pids")) and time.monotonic() < deadline:
        time.sleep(0.1)
    raise ValueError("boom on purpose from rank 1")


def exit_on_rank_1(code):
    """Rank 1 leaves with os._exit(code) (no result); the others return their rank."""
    rank = int(os.environ["HOROVOD_RANK"])
    if rank == 1:
        os._exit(code)
    return rank


def lock_result():
    """A result that cannot be pickled."""
    import threading

    return threading.Lock()


def keras_digits(epochs):
    """Keras 3 model.fit with horovod.tensorflow.keras on scikit-learn's digits (each rank its
    shard; a few epochs); returns (rank, test accuracy, digest of the weights)."""
    import hashlib

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    import horovod.tensorflow.keras as hvd

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()
    keras.utils.set_random_seed(1234 + hvd.rank())  # different starts: the broadcast aligns them
    digits = load_digits()
    x, y = (digits.data / 16.0).astype("float32"), digits.target.astype("int32")
    x_train, y_train, x_test, y_test = x[:1400], y[:1400], x[1400:], y[1400:]
    per_rank = len(x_train) // hvd.size()
    shard = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(10)])  # fmt: skip
    model.compile(
        optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05 * hvd.size(), momentum=0.9)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        x_train[shard], y_train[shard], batch_size=32, epochs=epochs, verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )  # fmt: skip
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights()))
    return hvd.rank(), float(accuracy), digest.hexdigest()
