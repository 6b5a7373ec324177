"""Synthetic training throughput of a keras.applications model (random weights, random data),
in the shape of upstream's tensorflow2_synthetic_benchmark.py, for CPUs: images are
--image-size pixels square (default 32) so that a conv net runs on a CPU.

    horovodrun -np 2 python examples/tensorflow2_synthetic_benchmark.py --model ResNet50

--no-horovod-comm runs the same processes and the same work without reducing gradients (each
rank trains alone), so the difference to a normal run is Horovod's communication overhead.
--compare-no-comm measures both in one run, interleaved, and splits the overhead: a third block
has the ranks wait for each other once per step without moving gradients, which is what any
synchronous step pays where step times vary from rank to rank.

Output (rank 0), as upstream: one "Iter #i: X img/sec per CPU" line per iteration, then
"Img/sec per CPU: mean +-c" and "Total img/sec on N CPU(s): total +-c". As upstream, c is
1.96 standard deviations of the per-iteration values (a 95% interval if they are normal).
Here the per-CPU line pools every rank's iterations, and the total is the sum over ranks
measured iteration by iteration (not rank 0's number times N).
"""

import argparse
import os
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(
        description="TensorFlow 2 synthetic benchmark",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--fp16-allreduce", action="store_true", help="use fp16 compression during allreduce"
    )
    p.add_argument("--model", default="ResNet50", help="keras.applications model name")
    p.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
    p.add_argument("--image-size", type=int, default=32, help="image height and width")
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument(
        "--num-warmup-batches",
        type=int,
        default=10,
        help="number of warm-up batches that don't count towards benchmark",
    )
    p.add_argument(
        "--num-batches-per-iter",
        type=int,
        default=10,
        help="number of batches per benchmark iteration",
    )
    p.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
    p.add_argument(
        "--no-horovod-comm",
        action="store_true",
        help="same work without gradient communication (measures the overhead)",
    )
    p.add_argument(
        "--compare-no-comm",
        action="store_true",
        help="each iteration times a block with communication, one with a barrier per step "
        "(one tiny allreduce after the gradients) and one without, in the same processes: "
        "prints the communication overhead and how much of it is waiting for the slowest rank",
    )
    p.add_argument(
        "--no-cuda",
        action="store_true",
        help="accepted for upstream compatibility; this benchmark always runs on the CPU",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="TensorFlow threads per rank (0: TensorFlow's default)",
    )
    return p.parse_args()


def main():
    args = parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    hvd.init()
    # On GPUs: one per process, by local rank (a no-op without GPUs).
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
        tf.config.experimental.set_memory_growth(gpus[hvd.local_rank() % len(gpus)], True)

    builder = getattr(keras.applications, args.model, None)
    if builder is None or not callable(builder):
        raise SystemExit(f"unknown keras.applications model {args.model!r}")
    model = builder(
        weights=None, input_shape=(args.image_size, args.image_size, 3), classes=args.num_classes
    )
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    data = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
    target = tf.random.uniform(
        [args.batch_size, 1], minval=0, maxval=args.num_classes, dtype=tf.int64
    )

    def make_step(comm, barrier=False):
        @tf.function
        def step(first_batch):
            with tf.GradientTape() as tape:
                loss = loss_fn(target, model(data, training=True))
            if comm:
                # Horovod: average the gradients across ranks.
                tape = hvd.DistributedGradientTape(tape, compression=compression)
            grads = tape.gradient(loss, model.trainable_variables)
            if barrier:
                # The ranks wait for each other where the gradients would be reduced: after the
                # first layer's gradient, the last one backpropagation computes.
                token = hvd.allreduce(tf.reduce_sum(grads[0]), name="step.barrier")
                grads[0] += 0.0 * token
            opt.apply_gradients(zip(grads, model.trainable_variables))
            # Horovod: start from rank 0's state (after the first step, when the slots exist).
            if first_batch:
                hvd.broadcast_variables(model.variables, root_rank=0)
                hvd.broadcast_variables(opt.variables, root_rank=0)

        return step

    benchmark_step = make_step(not args.no_horovod_comm)

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    device = "CPU"
    log(f"Model: {args.model}")
    log(f"Batch size: {args.batch_size}")
    log(f"Image size: {args.image_size}")
    log(f"Number of {device}s: {hvd.size()}")
    if args.no_horovod_comm:
        log("Gradient communication: off (--no-horovod-comm)")

    log("Running warmup...")
    benchmark_step(first_batch=True)
    timeit.timeit(lambda: benchmark_step(first_batch=False), number=args.num_warmup_batches)

    if args.compare_no_comm:
        compare(args, benchmark_step, make_step(False, barrier=True), make_step(False), log)
        return

    log("Running benchmark...")
    img_secs = []
    for i in range(args.num_iters):
        elapsed = timeit.timeit(
            lambda: benchmark_step(first_batch=False), number=args.num_batches_per_iter
        )
        img_sec = args.batch_size * args.num_batches_per_iter / elapsed
        log(f"Iter #{i}: {img_sec:.1f} img/sec per {device}")
        img_secs.append(img_sec)

    # Every rank's per-iteration numbers (one allgather, outside the timed region).
    per_rank = hvd.allgather(tf.constant([img_secs], tf.float64), name="img_secs").numpy()
    per_cpu, totals = per_rank.ravel(), per_rank.sum(axis=0)
    log(f"Img/sec per {device}: {per_cpu.mean():.1f} +-{1.96 * per_cpu.std():.1f}")
    log(
        f"Total img/sec on {hvd.size()} {device}(s): {totals.mean():.1f} "
        f"+-{1.96 * totals.std():.1f}"
    )


def compare(args, with_comm, barrier_only, without_comm, log):
    """Interleaved blocks (a noisy moment on a shared machine hits all alike): the overhead of
    communication is 1 - (img/sec with) / (img/sec without), per iteration, over every rank. A
    block with a barrier per step and no gradients splits it: waiting for the slowest rank
    (1 - barrier / without; what any synchronous step pays where step times vary) and moving the
    gradients (1 - with / barrier)."""
    for step in (barrier_only, without_comm):
        timeit.timeit(lambda s=step: s(first_batch=False), number=args.num_warmup_batches)
    rows = []
    log("Running benchmark (with / a barrier per step / without communication, interleaved)...")
    imgs = args.batch_size * args.num_batches_per_iter
    for i in range(args.num_iters):
        row = []
        for step in (with_comm, barrier_only, without_comm):
            # Start each block together, as the block with communication does.
            hvd.allreduce(tf.constant(0.0), name="compare.barrier")
            t = timeit.timeit(lambda s=step: s(first_batch=False), number=args.num_batches_per_iter)
            row.append(imgs / t)
        rows.append(row)
        log(
            f"Iter #{i}: {row[0]:.1f} img/sec per CPU with, {row[1]:.1f} barrier only, "
            f"{row[2]:.1f} without"
        )
    per_rank = hvd.allgather(tf.constant([rows], tf.float64), name="rows").numpy()
    with_, barrier, without = (per_rank[..., j].ravel() for j in range(3))
    overhead = 1 - with_ / without

    def pct(x):
        return f"{100 * np.median(x):.1f} %"

    log(
        f"Img/sec per CPU: {with_.mean():.1f} +-{1.96 * with_.std():.1f} with communication, "
        f"{barrier.mean():.1f} +-{1.96 * barrier.std():.1f} with a barrier per step only, "
        f"{without.mean():.1f} +-{1.96 * without.std():.1f} without"
    )
    log(
        f"Communication overhead: {pct(overhead)} median of "
        f"{overhead.size} pairs ({100 * overhead.mean():.1f} % mean, +-"
        f"{196 * overhead.std() / np.sqrt(overhead.size):.1f} %); scaling efficiency "
        f"{100 * (1 - np.median(overhead)):.1f} %"
    )
    log(
        f"  of which waiting for the slowest rank (a barrier per step): "
        f"{pct(1 - barrier / without)}; moving the gradients (with against a barrier per step): "
        f"{pct(1 - with_ / barrier)}"
    )


if __name__ == "__main__":
    main()
