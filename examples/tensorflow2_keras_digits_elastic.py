"""Elastic Keras 3 training on scikit-learn's digits: workers may be lost or added while it
runs, and the job goes on from its last commit (upstream's tensorflow2_keras_mnist_elastic.py
in shape). The Horovod changes are marked "Horovod:".

    horovodrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh \\
        python examples/tensorflow2_keras_digits_elastic.py --epochs 10
    # on the compose cluster: --host-discovery-script 'python -m horovod.runner.cluster --discover'

Each generation of ranks re-runs this file from the top (the driver relaunches the processes);
`hvd.elastic.run` then resumes the model, the optimizer and the epoch/batch counters from the
newest commit, so training picks up where it was, on the new number of ranks.
"""

import argparse
import hashlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402


def load_data(seed=0):
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")
    order = np.random.default_rng(seed).permutation(len(x))
    return x[order], y[order]


class Pause(keras.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate on one rank")
    parser.add_argument("--batches-per-commit", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--batch-sleep-ms",
        type=float,
        default=0,
        help="sleep after every batch: lets a demo or test add or remove workers while it runs",
    )
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    # Horovod: initialize (in every generation: each is a new process).
    hvd.init()
    keras.utils.set_random_seed(1234)
    x, y = load_data()

    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    # Horovod: scale the learning rate by the number of ranks, and wrap the optimizer.
    optimizer = keras.optimizers.SGD(learning_rate=args.lr * hvd.size(), momentum=0.9)
    model.compile(
        optimizer=hvd.DistributedOptimizer(optimizer),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )

    # Horovod: the state to keep across resets; epoch and batch say where training is.
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    def on_reset():
        # Horovod: the world's size changed: rescale the learning rate.
        model.optimizer.learning_rate.assign(args.lr * hvd.size())
        print(f"reset: {hvd.size()} rank(s), resuming at epoch {state.epoch}", flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        # Each rank's shard of the data for the current number of ranks.
        shard_x, shard_y = x[hvd.rank() :: hvd.size()], y[hvd.rank() :: hvd.size()]
        steps = len(x) // hvd.size() // args.batch_size  # the same on every rank
        data = (
            tf.data.Dataset.from_tensor_slices((shard_x, shard_y))
            .batch(args.batch_size, drop_remainder=True)
            .repeat()
        )
        model.fit(
            data,
            steps_per_epoch=steps,
            # The epochs left (UpdateEpochStateCallback counts on from state.epoch).
            epochs=args.epochs - state.epoch,
            verbose=2 if hvd.rank() == 0 else 0,
            callbacks=[
                # Horovod: keep state.batch / state.epoch current, then commit.
                hvd.elastic.UpdateBatchStateCallback(state),
                hvd.elastic.UpdateEpochStateCallback(state),
                hvd.elastic.CommitStateCallback(state, batches_per_commit=args.batches_per_commit),
            ]
            + ([Pause(args.batch_sleep_ms / 1000)] if args.batch_sleep_ms > 0 else []),
        )

    train(state)
    loss, acc = model.evaluate(x, y, verbose=0)
    weights = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]
    print(
        f"ELASTIC DONE rank={hvd.rank()} size={hvd.size()} epoch={state.epoch} "
        f"accuracy={acc:.3f} weights={weights}",
        flush=True,
    )


if __name__ == "__main__":
    main()
