"""Elastic custom training loop on scikit-learn's digits (upstream's
tensorflow2_mnist_elastic.py in shape): hvd.elastic.TensorFlowKerasState holds the model, the
optimizer and the epoch/batch counters; `state.commit()` every few batches is where a lost or
added worker is noticed. The Horovod changes are marked "Horovod:".

    horovodrun --min-np 1 --max-np 4 --host-discovery-script ./discover.sh \\
        python examples/tensorflow2_digits_custom_loop_elastic.py --epochs 10
"""

import argparse
import hashlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate on one rank")
    parser.add_argument("--batches-per-commit", type=int, default=5)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    # Horovod: initialize (each generation of ranks is a new process).
    hvd.init()
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")

    keras.utils.set_random_seed(1234)
    model = keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)]
    )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9)
    opt.build(model.trainable_variables)  # the state holds its slots from the start

    @tf.function
    def training_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # Horovod: the tape averages the gradients across ranks.
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Horovod: the state kept across resets; it is synced from rank 0 (or resumed) first.
    state = hvd.elastic.TensorFlowKerasState(model, opt, batch=0, epoch=0)

    def on_reset():
        # Horovod: a new number of ranks: rescale the learning rate.
        opt.learning_rate.assign(args.lr * hvd.size())

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        # Each rank's shard for the current number of ranks, the same length on every rank.
        per_rank = len(x) // hvd.size()
        steps = per_rank // args.batch_size
        xs = x[hvd.rank() * per_rank : (hvd.rank() + 1) * per_rank]
        ys = y[hvd.rank() * per_rank : (hvd.rank() + 1) * per_rank]
        while state.epoch < args.epochs:
            while state.batch < steps:
                b = slice(state.batch * args.batch_size, (state.batch + 1) * args.batch_size)
                loss = training_step(xs[b], ys[b])
                state.batch += 1
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            state.epoch += 1
            state.batch = 0
            state.commit()
            if hvd.rank() == 0:
                print(f"epoch {state.epoch} loss {float(loss):.4f} ranks {hvd.size()}", flush=True)

    train(state)
    weights = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]
    print(f"ELASTIC DONE rank={hvd.rank()} epoch={state.epoch} weights={weights}", flush=True)


if __name__ == "__main__":
    main()
