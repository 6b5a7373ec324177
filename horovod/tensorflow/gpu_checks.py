"""Every collective on GPU tensors against a NumPy reference: `python -m horovod.selftest --gpu`
and tests/gpu run these. Each check also asserts that the result lives on the GPU, i.e. that
Horovod's GPU kernel (NCCL) ran rather than a copy to host memory and the CPU kernel.
"""

import numpy as np


def pin_gpu(local_rank):
    """Makes GPU `local_rank % count` this process's only visible GPU; returns how many exist."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices(gpus[local_rank % len(gpus)], "GPU")
        tf.config.experimental.set_memory_growth(gpus[local_rank % len(gpus)], True)
    tf.config.set_soft_device_placement(False)  # no silent fallback to the CPU kernels
    return len(gpus)


def _on_gpu(t):
    return "GPU" in t.device


def checks(r, n):
    """Yields (description, ok) per check, on this rank."""
    import tensorflow as tf

    with tf.device("/GPU:0"):
        yield from _allreduce_checks(r, n)
        yield from _allgather_broadcast_checks(r, n)
        yield from _dtype_edge_checks(r, n)
        yield from _alltoall_reducescatter_checks(r, n)


def _allreduce_checks(r, n):
    """Sums of every NCCL dtype, average, scale factors, max, a fused group."""
    import tensorflow as tf

    import horovod.tensorflow as hvd

    tri = n * (n - 1) / 2
    for dtype in (
        tf.float32,
        tf.float16,
        tf.bfloat16,
        tf.float64,
        tf.int32,
        tf.int64,
        tf.uint8,
        tf.int8,
    ):
        x = tf.cast(tf.fill([1000], r + 1), dtype)
        y = hvd.allreduce(x, op=hvd.Sum, name=f"gpu.sum.{dtype.name}")
        want = n * (n + 1) // 2
        yield (
            f"NCCL allreduce sum {dtype.name}",
            _on_gpu(y) and np.all(tf.cast(y, tf.float64).numpy() == want),
        )
    y = hvd.allreduce(tf.fill([1 << 20], float(r)), op=hvd.Average, name="gpu.avg")
    yield "NCCL allreduce average float32 4 MiB", _on_gpu(y) and np.allclose(y.numpy(), tri / n)
    y = hvd.allreduce(
        tf.fill([7], float(r + 1)),
        op=hvd.Sum,
        prescale_factor=0.5,
        postscale_factor=3.0,
        name="gpu.scaled",
    )
    yield (
        "NCCL allreduce pre/postscale (pre-multiplied sum)",
        _on_gpu(y) and np.allclose(y.numpy(), 1.5 * n * (n + 1) / 2),
    )
    y = hvd.allreduce(tf.range(5, dtype=tf.int32) * (r + 1), op=hvd.Max, name="gpu.max")
    yield "NCCL allreduce max int32", _on_gpu(y) and np.array_equal(y.numpy(), np.arange(5) * n)
    outs = hvd.grouped_allreduce(
        [tf.fill([100 + i], float(r)) for i in range(8)], op=hvd.Sum, name="gpu.group"
    )
    yield (
        "NCCL grouped allreduce (fused in device memory)",
        all(_on_gpu(o) and np.all(o.numpy() == tri) for o in outs),
    )


def _allgather_broadcast_checks(r, n):
    """Allgathers of uneven and even first dimensions, broadcasts from the last rank and of bool."""
    import tensorflow as tf

    import horovod.tensorflow as hvd

    g = hvd.allgather(tf.fill([r + 1, 2], r), name="gpu.gather")
    want = np.concatenate([np.full((q + 1, 2), q) for q in range(n)])
    yield (
        "NCCL allgather, first dim differs per rank",
        _on_gpu(g) and np.array_equal(g.numpy(), want),
    )
    g = hvd.allgather(tf.fill([3, 2], float(r)), name="gpu.gather.even")
    yield (
        "NCCL allgather, equal first dims",
        _on_gpu(g)
        and np.array_equal(
            g.numpy(), np.repeat(np.arange(n, dtype=np.float32), 3)[:, None] * np.ones((1, 2))
        ),
    )
    b = hvd.broadcast(tf.fill([10], float(r)), root_rank=n - 1, name="gpu.bcast")
    yield f"NCCL broadcast from rank {n - 1}", _on_gpu(b) and np.all(b.numpy() == n - 1)
    b = hvd.broadcast(tf.constant([r == 0, True, False]), root_rank=0, name="gpu.bcast.bool")
    yield (
        "NCCL broadcast of bool (a dtype of its own)",
        _on_gpu(b) and b.dtype == tf.bool and b.numpy().tolist() == [True, True, False],
    )


def _dtype_edge_checks(r, n):
    """Integer scale factors, int16 reductions refused, uint16 gathered as bytes."""
    import tensorflow as tf

    import horovod.tensorflow as hvd

    # As upstream: each rank's share scaled in double and truncated, the sum postscaled so.
    got = hvd.allreduce(
        tf.fill([4], r + 1),
        op=hvd.Sum,
        prescale_factor=0.5,
        postscale_factor=3.0,
        name="gpu.iscale",
    )
    want = 3 * sum(int((q + 1) * 0.5) for q in range(n))
    yield (
        "integer scale factors, truncated as on the CPU (staged through host memory)",
        _on_gpu(got) and got.dtype == tf.int32 and got.numpy().tolist() == [want] * 4,
    )
    # NCCL has no 16-bit integer type: refused on every rank at negotiation (the input must
    # be in GPU memory for this to be the GPU path: Cast has GPU kernels for int16).
    x16 = tf.cast(tf.fill([4], r + 1), tf.int16)
    try:
        hvd.allreduce(x16, op=hvd.Sum, name="gpu.i16")
        refused = False
    except tf.errors.InvalidArgumentError as e:
        refused = "of int16 on GPU is not supported" in str(e)
    yield "int16 reductions refused on the GPU (NCCL has no such type)", _on_gpu(x16) and refused
    g = hvd.allgather(tf.cast(tf.fill([2], r), tf.uint16), name="gpu.gather.u16")
    want = np.repeat(np.arange(n), 2).tolist()
    yield (
        "NCCL allgather of uint16 (moved as bytes)",
        _on_gpu(g) and g.dtype == tf.uint16 and g.numpy().tolist() == want,
    )


def _alltoall_reducescatter_checks(r, n):
    """Alltoall with explicit splits, reducescatters of even and uneven rows."""
    import tensorflow as tf

    import horovod.tensorflow as hvd

    a, splits = hvd.alltoall(tf.fill([2 * n], r), splits=[2] * n, name="gpu.a2a")
    yield (
        "NCCL alltoall (grouped send/recv)",
        _on_gpu(a)
        and np.array_equal(a.numpy(), np.repeat(np.arange(n), 2))
        and list(splits.numpy()) == [2] * n,
    )
    rs = hvd.reducescatter(tf.ones([2 * n, 3]), op=hvd.Sum, name="gpu.rs")
    yield (
        "NCCL reducescatter, even rows",
        _on_gpu(rs) and rs.shape == (2, 3) and np.all(rs.numpy() == n),
    )
    rs = hvd.reducescatter(tf.ones([2 * n + 1, 3]), op=hvd.Average, name="gpu.rs.uneven")
    rows = 3 if r == 0 else 2
    yield (
        "NCCL reducescatter average, uneven rows",
        _on_gpu(rs) and rs.shape == (rows, 3) and np.allclose(rs.numpy(), 1.0),
    )
