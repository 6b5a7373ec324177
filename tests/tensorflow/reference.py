"""Inputs, references and checks that every rank computes itself, for the op scenarios: all
ranks' inputs come from per-rank seeds, so every rank can regenerate every other rank's input."""

import zlib

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd

REDUCE_DTYPES = [
    tf.uint8,
    tf.int8,
    tf.uint16,
    tf.int16,
    tf.int32,
    tf.int64,
    tf.float16,
    tf.bfloat16,
    tf.float32,
    tf.float64,
]
MOVE_DTYPES = [tf.bool] + REDUCE_DTYPES  # allgather, broadcast, alltoall also move bool
OPS = {
    "sum": hvd.Sum,
    "average": hvd.Average,
    "min": hvd.Min,
    "max": hvd.Max,
    "product": hvd.Product,
}
# 1-3 dims; the last is above the engine's direct-exchange size (32 KiB) for every dtype, so the
# ring runs on TF's buffers too.
SHAPES = [(17,), (3, 4), (2, 3, 2), (40, 30, 30)]


def function(fn):
    """tf.function without AutoGraph, for the big op matrices: AutoGraph's per-call handling
    of Horovod's Python wrappers costs ~10-20 ms per op while tracing, seconds over hundreds of
    ops. The other scenarios (steady, gradients, tape, ...) use plain tf.function, AutoGraph
    included."""
    return tf.function(fn, autograph=False)


def seed(*parts):
    return zlib.crc32(repr(parts).encode())


def make(rank, shape, dt, op="sum", salt=0):
    """(tensor, its exact values as float64) of `rank`: deterministic, in a range where no
    reduction overflows any dtype."""
    rng = np.random.default_rng(seed(rank, tuple(shape), dt.name, op, salt))
    if dt == tf.bool:
        v = rng.integers(0, 2, size=shape)
    elif op == "product":
        v = rng.choice([1, 2], size=shape) if dt.is_integer else rng.uniform(0.8, 1.25, shape)
    elif dt.is_unsigned:
        v = rng.integers(0, 40, size=shape)
    elif dt.is_integer:
        v = rng.integers(-20, 20, size=shape)
    else:
        v = rng.uniform(-2, 2, size=shape)
    t = tf.cast(tf.constant(v), dt)
    return t, tf.cast(t, tf.float64).numpy()


def reference(values, op, dt):
    """What reducing the ranks' exact values gives; integer Average truncates (as the engine)."""
    stack = np.stack(values)
    if op == "sum":
        return stack.sum(0)
    if op == "average":
        r = stack.sum(0) / len(values)
        return r if dt.is_floating else np.trunc(r)
    if op == "min":
        return stack.min(0)
    if op == "max":
        return stack.max(0)
    return stack.prod(0)


def check(got, want, dt, what):
    assert isinstance(got, tf.Tensor), f"{what}: got {type(got).__name__}"
    assert got.dtype == dt, f"{what}: dtype {got.dtype.name} != {dt.name}"
    want = np.asarray(want, np.float64)
    assert tuple(got.shape) == want.shape, f"{what}: shape {tuple(got.shape)} != {want.shape}"
    g = tf.cast(got, tf.float64).numpy()
    if dt.is_floating:
        tol = {2: 3e-2, 4: 1e-5, 8: 1e-12}[dt.size]
        ok = np.allclose(g, want, rtol=tol, atol=4 * tol)
    else:
        ok = np.array_equal(g, want)
    assert ok, (
        f"{what}: max abs error {np.max(np.abs(g - want)) if g.size else 0}\n"
        f" got {g.ravel()[:8]}\n want {want.ravel()[:8]}"
    )


def rows_of(total, n):
    """Rows of each rank in reducescatter and default alltoall splits: the first ranks get one
    extra row when `total` does not divide evenly."""
    return [total // n + (1 if q < total % n else 0) for q in range(n)]


def address(t):
    """Where a CPU tensor's data lies (DLPack exports it without a copy)."""
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.c_void_p.from_address(get(tf.experimental.dlpack.to_dlpack(t), b"dltensor")).value
