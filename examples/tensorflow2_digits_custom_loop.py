"""Data-parallel custom training loop on scikit-learn's digits (no download), in the shape of
upstream's tensorflow2_mnist.py: hvd.DistributedGradientTape averages the gradients and
hvd.broadcast_variables copies rank 0's state after the first step. The Horovod changes are
marked "Horovod:".

    horovodrun -np 2 python examples/tensorflow2_digits_custom_loop.py
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402


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
    # Horovod: each rank takes its own equal-sized shard, so all run the same number of steps.
    per_rank = len(x_train) // hvd.size()
    shard = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    steps_per_epoch = per_rank // args.batch_size
    dataset = (
        tf.data.Dataset.from_tensor_slices((x_train[shard], y_train[shard]))
        .shuffle(per_rank, seed=hvd.rank())
        .batch(args.batch_size, drop_remainder=True)
        .repeat()
    )

    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # Horovod: scale the learning rate by the number of ranks (the global batch grows).
    opt = keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # Horovod: the tape averages the gradients across ranks.
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        # Horovod: after the first step (when the optimizer's slots exist), every rank takes
        # rank 0's model and optimizer state. first_batch is a Python bool: two traces.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)
        return loss

    batches = iter(dataset)
    for epoch in range(args.epochs):
        losses = [
            training_step(*next(batches), epoch == 0 and step == 0)
            for step in range(steps_per_epoch)
        ]
        # Horovod: the epoch's loss averaged over the ranks (every rank takes part).
        loss = hvd.allreduce(tf.reduce_mean(losses), name="epoch_loss")
        if hvd.rank() == 0 and (epoch % 5 == 4 or epoch == args.epochs - 1):
            print(f"epoch {epoch + 1:3d}  loss {float(loss):.4f}")

    # Every rank holds the same weights now; rank 0 evaluates on the whole test set.
    if hvd.rank() == 0:
        predicted = np.argmax(model(x_test, training=False).numpy(), axis=1)
        print(f"Ranks: {hvd.size()}  training samples per rank: {per_rank}")
        print(f"Test accuracy: {np.mean(predicted == y_test):.4f}")


if __name__ == "__main__":
    main()
