"""A Keras model.fit benchmark written the way upstream Horovod 0.28's Keras users write one
(the shape of its tensorflow2_keras_synthetic_benchmark.py: tf.keras.applications, tf.optimizers,
hvd.DistributedOptimizer, compile(experimental_run_tf_function=False), the broadcast and
metric-average callbacks), using only upstream's documented API. test_keras_flavours.py runs it
unchanged under TF_USE_LEGACY_KERAS=1 (Keras 2 through tf_keras), where that code still runs;
the argument Keras 3's compile() no longer takes is upstream's, kept on purpose.
"""

import argparse
import os
from timeit import default_timer as timer

import numpy as np
import tensorflow as tf
from tensorflow.keras import applications

import horovod.tensorflow.keras as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="MobileNetV2")
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--image-size", type=int, default=32)
parser.add_argument("--num-batches-per-iter", type=int, default=2)
parser.add_argument("--num-iters", type=int, default=2)
parser.add_argument("--fp16-allreduce", action="store_true")
args = parser.parse_args()

hvd.init()
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
if hvd.rank() == 0:
    print("Model: %s" % args.model)
    print("Number of CPUs: %d" % hvd.size())

model = getattr(applications, args.model)(
    weights=None, input_shape=(args.image_size, args.image_size, 3), classes=10
)
opt = tf.optimizers.SGD(0.01 * hvd.size())

data = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=9, dtype=tf.int64)
dataset = tf.data.Dataset.from_tensor_slices((data, target)).cache().repeat().batch(args.batch_size)

compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
opt = hvd.DistributedOptimizer(opt, compression=compression)
model.compile(
    loss=tf.losses.SparseCategoricalCrossentropy(),
    optimizer=opt,
    experimental_run_tf_function=False,
)

callbacks = [
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
]


class TimingCallback(tf.keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.img_secs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.starttime = timer()

    def on_epoch_end(self, epoch, logs=None):
        img_sec = args.batch_size * args.num_batches_per_iter / (timer() - self.starttime)
        print("Iter #%d: %.1f img/sec per CPU" % (epoch, img_sec))
        self.img_secs.append(img_sec)

    def on_train_end(self, logs=None):
        mean = np.mean(self.img_secs)
        print("Total img/sec on %d CPU(s): %.1f" % (hvd.size(), hvd.size() * mean))


if hvd.rank() == 0:
    callbacks.append(TimingCallback())

model.fit(
    dataset,
    steps_per_epoch=args.num_batches_per_iter,
    callbacks=callbacks,
    epochs=args.num_iters,
    verbose=0,
)

# Trainable weights only: batch norm's moving statistics follow each rank's own data.
weights = np.concatenate([w.numpy().ravel() for w in model.trainable_weights])
gathered = np.asarray(hvd.allgather(weights[None]))
if hvd.rank() == 0:
    same = all(np.array_equal(gathered[0], g) for g in gathered)
    print("trainable weights identical on all ranks: %s" % same)
