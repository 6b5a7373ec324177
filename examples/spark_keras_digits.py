"""The Keras digits model of tensorflow2_keras_digits.py trained by horovod.spark.run: one rank per
Spark task, the ranks over Horovod's TCP transport (no ssh, no mpirun). The driver prints each
rank's host, test accuracy and a digest of its weights (equal digests: the ranks stayed in sync).

    python examples/spark_keras_digits.py --master spark://spark-master:7077 --num-proc 4

`make demo-spark` runs it in the driver container of a 2-worker Spark standalone cluster
(compose/compose.spark.yaml). The executors need this folder at the same path (the images have
it at /opt/horovod/examples): each rank loads the data split from tensorflow2_keras_digits.py.
"""

import argparse
import os
import sys
import time

EXAMPLES = os.path.dirname(os.path.abspath(__file__))


def train(examples, epochs, batch_size, lr):
    """One rank: its shard of the digits, the model fitted with Horovod's optimizer and
    callbacks; returns (rank, host, test accuracy, weights digest)."""
    import hashlib
    import socket

    sys.path.insert(0, examples)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf
    from tensorflow2_keras_digits import load_data  # the same split as the horovodrun example

    import horovod.tensorflow.keras as hvd

    # The ranks share the workers' cores: one TensorFlow thread each.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()  # Horovod: no argument, the Spark task set the rank's variables
    keras.utils.set_random_seed(1234 + hvd.rank())
    (x_train, y_train), (x_test, y_test) = load_data()
    per_rank = len(x_train) // hvd.size()
    shard = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10),
        ]
    )
    # Horovod: the learning rate scaled by the ranks, the gradients averaged across them.
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(lr * hvd.size(), momentum=0.9))
    model.compile(
        optimizer=opt,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        x_train[shard],
        y_train[shard],
        batch_size=batch_size,
        epochs=epochs,
        # Horovod: every rank starts from rank 0's weights; metrics averaged over the ranks.
        callbacks=[
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback(),
        ],
        verbose=2 if hvd.rank() == 0 else 0,  # rank 0's epochs reach the driver as [0]<stdout>
    )
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights()))
    return hvd.rank(), socket.gethostname(), float(accuracy), digest.hexdigest()[:16]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER_URL", "local[2]"))
    parser.add_argument("--num-proc", type=int, default=None, help="default: every task slot")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate on one rank")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import horovod.spark

    spark = SparkSession.builder.master(args.master).appName("horovod-spark-keras-digits")
    spark = spark.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        start = time.perf_counter()
        rows = horovod.spark.run(
            train,
            args=(EXAMPLES, args.epochs, args.batch_size, args.lr),
            num_proc=args.num_proc,
        )
        seconds = time.perf_counter() - start
    finally:
        spark.stop()
    print(f"horovod.spark.run: {len(rows)} ranks, {seconds:.1f} s")
    for rank, host, accuracy, digest in rows:
        print(f"rank {rank} on {host}: test accuracy {accuracy:.4f}, weights {digest}")
    same = len({r[3] for r in rows}) == 1
    print(
        f"Test accuracy: {rows[0][2]:.4f}  (all ranks' weights {'identical' if same else 'DIFFER'})"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
