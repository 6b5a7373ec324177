"""TensorFlow op overhead against the NumPy frontend on the same engine, in one run.

    mpirun -np 2 --bind-to core python benchmarks/frontend_tensorflow.py

  latency  4 KiB float32 allreduce, median of single timed ops: hvd.allreduce on an eager
           tf.Tensor vs horovod.numpy.allreduce (same name, so both take the cached fast path)
  bandwidth 16 MiB float32 allreduce, busbw (bytes * 2(n-1)/n / time) of both frontends
  fusion   100 gradients of 40 KiB reduced in a tf.function through DistributedGradientTape's
           grouped allreduce, vs one 4000 KiB tensor in a tf.function, vs 100 separate
           hvd.allreduce ops in a tf.function (each its own op: what grouping saves)
    mpirun -np 2 --bind-to core python benchmarks/frontend_tensorflow.py --model MobileNetV2

  model    a model's gradients (the float32 shapes of its trainable variables, as
           grouped.py --model takes them) made fresh in a tf.function and reduced through
           DistributedGradientTape, against the same function without Horovod and one
           tensor of their total through horovod.numpy (out=): what the step's allreduce adds
    mpirun -np 2 --bind-to core python benchmarks/frontend_tensorflow.py --allgather

  allgather 1, 4, 16 and 64 MiB float32 from each rank gathered in a tf.function (its output
           dies every call, as a step's would), against horovod.numpy's allgather of the same
           array: busbw (output bytes * (n-1)/n / time) of both
Each figure is the median of 5 trials that interleave the methods (a noisy moment on this shared
machine hits both alike); a trial runs `iters` ops back to back.
"""

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.numpy as hnp  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

hvd.init()
from runner import COMM, N, median_times, say  # noqa: E402  (after hvd.init)

KIB, MIB = 1 << 10, 1 << 20


def latency_us(fn, count=2000):
    fn()
    times = []
    for _ in range(count):
        COMM.Barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main():
    say(
        f"ranks {N}, TensorFlow {tf.__version__}, inter/intra-op threads "
        f"{tf.config.threading.get_inter_op_parallelism_threads()}/"
        f"{tf.config.threading.get_intra_op_parallelism_threads()}"
    )
    latency()
    bandwidth()
    fusion()


def latency():
    small_np = np.ones(KIB, np.float32)
    small_tf = tf.ones([KIB])
    tf_lat = latency_us(lambda: hvd.allreduce(small_tf, op=hvd.Sum, name="lat.tf"))
    np_lat = latency_us(lambda: hnp.allreduce(small_np, op=hnp.Sum, name="lat.np"))
    say(
        f"latency 4 KiB: tf eager {tf_lat:7.1f} us   numpy {np_lat:7.1f} us   "
        f"tf - numpy {tf_lat - np_lat:+6.1f} us"
    )


def bandwidth():
    big_np = np.ones(4 * MIB, np.float32)
    big_out = np.empty_like(big_np)
    big_tf = tf.ones([4 * MIB])

    @tf.function
    def big_fresh():  # the input dies in the op (as a gradient does): reduced in place
        return hvd.allreduce(big_tf + 0.0, op=hvd.Sum, name="bw.fresh")[0]

    @tf.function
    def big_add_only():  # what the + 0.0 above costs by itself
        return (big_tf + 0.0)[0]

    t_tf, t_fresh, t_add, t_np = median_times(
        [
            lambda: hvd.allreduce(big_tf, op=hvd.Sum, name="bw.tf"),
            big_fresh,
            big_add_only,
            lambda: hnp.allreduce(big_np, op=hnp.Sum, name="bw.np", out=big_out),
        ],
        iters=10,
    )
    bw = lambda t: 16 * MIB * 2 * (N - 1) / N / t / 1e9  # noqa: E731
    say(
        f"busbw 16 MiB: numpy (out=) {bw(t_np):5.2f} GB/s   tf eager, kept input (fresh output) "
        f"{bw(t_tf):5.2f} GB/s = {t_np / t_tf:4.2f}x   tf.function, input dies in the op "
        f"{bw(t_fresh - t_add):5.2f} GB/s = {t_np / (t_fresh - t_add):4.2f}x "
        f"(after subtracting the {t_add * 1e3:.2f} ms add that makes it)"
    )


def fusion():
    grads = [tf.Variable(tf.ones([10 * KIB])) for _ in range(100)]  # 100 x 40 KiB
    one = tf.Variable(tf.ones([1000 * KIB]))  # 4000 KiB

    @tf.function
    def grouped():
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_sum(g) for g in grads])
        tape = hvd.DistributedGradientTape(tape, op=hvd.Sum)
        return tape.gradient(loss, grads)[0][0]

    @tf.function
    def single():
        return hvd.allreduce(one, op=hvd.Sum)[0]

    @tf.function
    def separate():
        return tf.add_n([hvd.allreduce(g, op=hvd.Sum)[0] for g in grads])

    one_np = np.ones(1000 * KIB, np.float32)
    one_out = np.empty_like(one_np)
    t_group, t_one, t_sep, t_one_np = median_times(
        [
            grouped,
            single,
            separate,
            lambda: hnp.allreduce(one_np, op=hnp.Sum, name="one.np", out=one_out),
        ],
        iters=20,
    )
    say(
        f"100 x 40 KiB in a tf.function: grouped {t_group * 1e3:6.2f} ms   one 4000 KiB tensor: "
        f"tf.function {t_one * 1e3:6.2f} ms (its output is allocated each call), numpy out= "
        f"{t_one_np * 1e3:6.2f} ms   grouped/one: {t_group / t_one:4.2f}x (tf), "
        f"{t_group / t_one_np:4.2f}x (numpy)   100 separate ops {t_sep * 1e3:6.2f} ms "
        f"({t_sep / t_one_np:4.2f}x numpy's one tensor)"
    )


def model(name):
    from grouped import model_sizes  # noqa: E402  (its hvd.init is horovod.numpy's)

    sizes = model_sizes(name)
    variables = [tf.Variable(tf.ones([s])) for s in sizes]

    def gradients(reduce):
        # Fresh gradients every call (1.5 everywhere), as backpropagation makes them.
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_sum(v * 1.5) for v in variables])
        if reduce:
            tape = hvd.DistributedGradientTape(tape, op=hvd.Sum)
        return tape.gradient(loss, variables)[0][0]

    with_hvd = tf.function(lambda: gradients(True))
    without = tf.function(lambda: gradients(False))
    one_np = np.ones(sum(sizes), np.float32)
    one_out = np.empty_like(one_np)
    t_with, t_without, t_np = median_times(
        [
            with_hvd,
            without,
            lambda: hnp.allreduce(one_np, op=hnp.Sum, name="model.np", out=one_out),
        ],
        iters=20,
        trials=9,
    )
    mib = 4 * sum(sizes) / MIB
    say(
        f"{name}'s gradients ({len(sizes)} tensors, {mib:.1f} MiB) in a tf.function: with "
        f"DistributedGradientTape {t_with * 1e3:6.2f} ms, without {t_without * 1e3:6.2f} ms: "
        f"the allreduce adds {(t_with - t_without) * 1e3:6.2f} ms; numpy, one tensor of the same "
        f"size (out=) {t_np * 1e3:6.2f} ms ({(t_with - t_without) / t_np:4.2f}x)"
    )


def allgather():
    for mib in (1, 4, 16, 64):
        x_np = np.ones(mib * MIB // 4, np.float32)
        x = tf.constant(x_np)
        gathered = tf.function(lambda: hvd.allgather(x, name=f"ag.tf.{mib}")[0])
        t_tf, t_np = median_times(
            [gathered, lambda: hnp.allgather(x_np, name=f"ag.np.{mib}")], iters=10
        )
        busbw = [N * mib * MIB * (N - 1) / N / t / 1e9 for t in (t_tf, t_np)]
        say(
            f"allgather {mib:3d} MiB from each rank: tensorflow {t_tf * 1e3:7.2f} ms "
            f"({busbw[0]:5.2f} GB/s), numpy {t_np * 1e3:7.2f} ms ({busbw[1]:5.2f} GB/s)"
        )


if __name__ == "__main__":
    if "--allgather" in sys.argv:
        allgather()
    elif "--model" in sys.argv:
        model(sys.argv[sys.argv.index("--model") + 1])
    else:
        main()
