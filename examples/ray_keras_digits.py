"""The Keras digits model (examples/tensorflow2_keras_digits.py) trained on a Ray cluster by
horovod.ray.RayExecutor: one rank per Ray actor, placed by a placement group, the ranks over
Horovod's TCP transport (no ssh, no mpirun). The Horovod changes are marked "Horovod:".

    make demo-ray                                         # a compose Ray cluster, 4 ranks
    python examples/ray_keras_digits.py --address auto    # on a node of a running Ray cluster
    python examples/ray_keras_digits.py --address local   # a Ray of its own on this machine

Each rank trains on its own shard of scikit-learn's digits (shipped inside the package, nothing
is downloaded) and returns where it ran, its test accuracy and a digest of its weights: equal
digests mean the ranks stayed in sync. It exits 1 when they differ.
"""

import argparse
import time


def train(epochs, batch_size, lr, warmup_epochs):
    """Runs in every Ray actor (one rank each); returns that rank's report."""
    import hashlib
    import os
    import socket

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import ray
    import tensorflow as tf
    from sklearn.datasets import load_digits

    import horovod.tensorflow.keras as hvd

    # One thread each: the actors of a node share its cores.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    # Horovod: initialize (the actor has its rank's variables; the driver serves the rendezvous).
    hvd.init()
    keras.utils.set_random_seed(1234 + hvd.rank())

    # The same split on every rank (a fixed shuffle, the last 20% for the test), then the
    # rank's own equal-sized shard of the training set.
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    n_test = len(x) // 5
    x_test, y_test = x[:n_test], y[:n_test]
    per_rank = (len(x) - n_test) // hvd.size()
    start = n_test + hvd.rank() * per_rank
    x_train, y_train = x[start : start + per_rank], y[start : start + per_rank]

    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10),
        ]
    )
    # Horovod: scale the learning rate by the number of ranks; average the gradients.
    scaled_lr = lr * hvd.size()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(scaled_lr, momentum=0.9))
    model.compile(
        optimizer=opt,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    callbacks = [
        # Horovod: start every rank from rank 0's weights.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: epoch metrics averaged over the ranks.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: ramp the learning rate up over the first epochs.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=warmup_epochs),
    ]
    began = time.perf_counter()
    model.fit(
        x_train, y_train, batch_size=batch_size, epochs=epochs, callbacks=callbacks, verbose=0
    )
    seconds = time.perf_counter() - began
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    weights = b"".join(np.asarray(w).tobytes() for w in model.get_weights())
    return {
        "rank": hvd.rank(),
        "local_rank": hvd.local_rank(),
        "host": socket.gethostname(),
        "node_ip": ray.util.get_node_ip_address(),
        "accuracy": float(accuracy),
        "samples_per_s": per_rank * epochs / seconds,
        "weights": hashlib.sha256(weights).hexdigest()[:16],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--address", default="auto", help="Ray address; 'local': a Ray of its own")
    parser.add_argument("--workers", type=int, default=4, help="ranks (Ray actors)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate on one rank")
    parser.add_argument("--warmup-epochs", type=int, default=3)
    args = parser.parse_args()

    import ray

    from horovod.ray import RayExecutor

    ray.init(address=None if args.address == "local" else args.address, log_to_driver=False)
    # Horovod: one rank per actor of one CPU, packed onto as few Ray nodes as fit.
    settings = RayExecutor.create_settings(timeout_s=60)
    executor = RayExecutor(settings, num_workers=args.workers, cpus_per_worker=1)
    began = time.perf_counter()
    executor.start()
    print(f"RayExecutor.start(): {args.workers} workers in {time.perf_counter() - began:.1f} s")
    try:
        began = time.perf_counter()
        rows = executor.run(train, args=[args.epochs, args.batch_size, args.lr, args.warmup_epochs])
        print(f"RayExecutor.run(train): {time.perf_counter() - began:.1f} s")
    finally:
        executor.shutdown()
    for r in rows:
        print(
            f"rank {r['rank']} (local {r['local_rank']}) on {r['host']} ({r['node_ip']}): "
            f"test accuracy {r['accuracy']:.4f}, {r['samples_per_s']:,.0f} samples/s, "
            f"weights {r['weights']}"
        )
    same = len({r["weights"] for r in rows}) == 1
    hosts = sorted({r["host"] for r in rows})
    print(
        f"Test accuracy: {rows[0]['accuracy']:.4f} on {len(rows)} ranks across {len(hosts)} "
        f"Ray node(s) (all ranks' weights {'identical' if same else 'DIFFER'})"
    )
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
