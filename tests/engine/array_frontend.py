"""The smallest frontend over the shared submission layer (horovod/common): Python's
array.array in, array.array out, kept as a test of the layer. These lines are all a frontend
writes to get every collective with handles, op names, argument checks negotiated to every rank,
process sets and object collectives; scenarios_layer.py runs them under real MPI ranks."""

import array
import functools

import numpy as np

from horovod.common import array_ops
from horovod.common.api import *  # noqa: F403  (init, rank, ProcessSet, Sum, ...)
from horovod.common.array_ops import allgather_object, broadcast_object  # noqa: F401
from horovod.common.handles import poll, synchronize  # noqa: F401


def _host(tensor):  # tensor in: a view of its buffer (typecodes are NumPy's), no copy
    if not isinstance(tensor, array.array):
        raise TypeError(f"expected an array.array, got {type(tensor).__name__}")
    return np.frombuffer(tensor, dtype=tensor.typecode)


def _wrap(a):  # tensor out
    return array.array(a.dtype.char, a.tobytes())


for _op in (
    "allreduce",
    "grouped_allreduce",
    "allgather",
    "broadcast",
    "alltoall",
    "reducescatter",
):
    for _name in (_op, _op + "_async"):
        globals()[_name] = functools.partial(getattr(array_ops, _name), host=_host, wrap=_wrap)
