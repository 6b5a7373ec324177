"""TensorFlow's adapter of the one reference (tests/support/reference.py): its dtypes, inputs as
tensors, the check of a result tensor; and two helpers of TF's op scenarios (function,
address)."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support import reference as core
from tests.support.reference import reference, rows_of, seed  # noqa: F401  (the scenarios')

REDUCE_DTYPES = [tf.as_dtype(name) for name in core.REDUCE_DTYPES]
MOVE_DTYPES = [tf.as_dtype(name) for name in core.MOVE_DTYPES]
OPS = core.ops(hvd)
# 1-3 dims; the last is above the engine's direct-exchange size (32 KiB) for every dtype, so the
# ring runs on TF's buffers too.
SHAPES = [(17,), (3, 4), (2, 3, 2), (40, 30, 30)]


def function(fn):
    """tf.function without AutoGraph, for the big op matrices: AutoGraph's per-call handling
    of Horovod's Python wrappers costs ~10-20 ms per op while tracing, seconds over hundreds of
    ops. The other scenarios (steady, gradients, tape, ...) use plain tf.function, AutoGraph
    included."""
    return tf.function(fn, autograph=False)


def make(rank, shape, dt, op="sum", salt=0):
    """(tensor, its exact values as float64) of `rank` (core.values)."""
    t = tf.cast(tf.constant(core.values(rank, shape, dt.name, op, salt)), dt)
    return t, tf.cast(t, tf.float64).numpy()


def check(got, want, dt, what):
    """A result tensor: of dtype dt, and core.assert_close to want."""
    assert isinstance(got, tf.Tensor), f"{what}: got {type(got).__name__}"
    assert got.dtype == dt, f"{what}: dtype {got.dtype.name} != {dt.name}"
    want = np.asarray(want, np.float64)
    assert tuple(got.shape) == want.shape, f"{what}: shape {tuple(got.shape)} != {want.shape}"
    core.assert_close(tf.cast(got, tf.float64).numpy(), want, dt.name, what)


def address(t):
    """Where a CPU tensor's data lies (DLPack exports it without a copy)."""
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.c_void_p.from_address(get(tf.experimental.dlpack.to_dlpack(t), b"dltensor")).value
