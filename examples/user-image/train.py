"""Example of "your own training code": logistic regression with Keras on scikit-learn's breast
cancer data set (it ships inside scikit-learn: nothing is downloaded), data-parallel with
horovod.tensorflow.keras. Rank 0 writes a result file, e.g. into the shared /workspace.

    horovodrun python /app/train.py --epochs 20 --out /workspace/result.json
"""

import argparse
import hashlib
import json
import os
import socket

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--out", help="rank 0 writes accuracy and a weights digest here (JSON)")
    args = p.parse_args()

    hvd.init()
    keras.utils.set_random_seed(7)
    data = load_breast_cancer()
    x = ((data.data - data.data.mean(0)) / data.data.std(0)).astype("float32")
    y = data.target.astype("float32")
    order = np.random.default_rng(0).permutation(len(x))  # the same split on every rank
    x, y = x[order], y[order]
    x_test, y_test, x, y = x[:100], y[:100], x[100:], y[100:]
    per_rank = len(x) // hvd.size()
    mine = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)

    model = keras.Sequential([keras.Input((x.shape[1],)), keras.layers.Dense(1, "sigmoid")])
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05 * hvd.size()))
    model.compile(opt, "binary_crossentropy", metrics=["accuracy"])
    model.fit(
        x[mine],
        y[mine],
        batch_size=16,
        epochs=args.epochs,
        verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]
    print(
        f"user-train: rank {hvd.rank()}/{hvd.size()} on {socket.gethostname()}: "
        f"accuracy {accuracy:.3f}, weights {digest}",
        flush=True,
    )
    if args.out and hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump({"ranks": hvd.size(), "accuracy": accuracy, "weights": digest}, f)


if __name__ == "__main__":
    main()
