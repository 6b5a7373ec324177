"""Data-parallel Keras 3 model.fit on scikit-learn's digits (8x8 images, 10 classes; the data
ships inside scikit-learn, nothing is downloaded), in the shape of upstream's
tensorflow2_keras_mnist.py. The Horovod changes are marked "Horovod:".

    horovodrun -np 2 python examples/tensorflow2_keras_digits.py

Each rank trains on its own shard of the training set (equal sizes, so every rank runs the
same number of steps) with the learning rate scaled by the number of ranks; the test
accuracy is about the same on 1 and on N ranks.
"""

import argparse
import hashlib
import os
import socket
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402


def load_data(test_fraction=0.2, seed=0):
    """The same split on every rank: a fixed shuffle, then the last 20% are the test set."""
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = int(len(x) * test_fraction)
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate on one rank")
    parser.add_argument("--warmup-epochs", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=1, help="TensorFlow threads per rank (ranks share the cores)"
    )
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    # Horovod: initialize.
    hvd.init()
    # On GPUs: one per process, by local rank (a no-op without GPUs).
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
        tf.config.experimental.set_memory_growth(gpus[hvd.local_rank() % len(gpus)], True)
    keras.utils.set_random_seed(1234 + hvd.rank())

    (x_train, y_train), (x_test, y_test) = load_data()
    # Horovod: each rank takes its own equal-sized shard of the training data.
    per_rank = len(x_train) // hvd.size()
    shard = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    x_train, y_train = x_train[shard], y_train[shard]

    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10),
        ]
    )

    # Horovod: scale the learning rate by the number of ranks (the global batch grows).
    scaled_lr = args.lr * hvd.size()
    opt = keras.optimizers.SGD(scaled_lr, momentum=0.9)
    # Horovod: average the gradients across ranks before they are applied.
    opt = hvd.DistributedOptimizer(opt)
    model.compile(
        optimizer=opt,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )

    callbacks = [
        # Horovod: start every rank from rank 0's weights (broadcast after the first batch).
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: epoch metrics averaged over the ranks' shards.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: ramp the learning rate from lr to lr * size over the first epochs.
        hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=scaled_lr,
            warmup_epochs=args.warmup_epochs,
            verbose=1 if hvd.rank() == 0 else 0,
        ),
    ]
    # Horovod: only rank 0 reports progress.
    verbose = 2 if hvd.rank() == 0 else 0
    start = time.perf_counter()
    model.fit(
        x_train,
        y_train,
        batch_size=args.batch_size,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=verbose,
    )
    seconds = time.perf_counter() - start

    # Every rank evaluates its (identical) weights on the whole test set; rank 0 prints one
    # line per rank: where it ran, its accuracy, its training throughput and a digest of its
    # weights (equal digests: the ranks stayed in sync).
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights()))
    mine = (
        hvd.rank(),
        socket.gethostname(),
        accuracy,
        per_rank * args.epochs / seconds,
        digest.hexdigest()[:16],
    )
    rows = hvd.allgather_object(mine, name="demo.report")
    if hvd.rank() == 0:
        print(f"Ranks: {hvd.size()}  training samples per rank: {per_rank}")
        for rank, host, acc, rate, weights in rows:
            print(
                f"rank {rank} on {host}: test accuracy {acc:.4f}, {rate:,.0f} samples/s, "
                f"weights {weights}"
            )
        print(
            f"Test accuracy: {rows[0][2]:.4f}  (all ranks' weights "
            f"{'identical' if len({r[4] for r in rows}) == 1 else 'DIFFER'})"
        )


if __name__ == "__main__":
    main()
