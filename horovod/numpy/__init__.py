"""Horovod for NumPy arrays: the framework-neutral frontend (`import horovod.numpy as hvd`).

Every op has a blocking form and an `_async` form returning a handle for `poll`/`synchronize`.
Ops are matched across ranks by name; pass stable names (e.g. "grad/layer1") so that repeated
steps take the engine's cached fast path. Unnamed ops get a per-process counter name, which
matches across ranks only if every rank issues unnamed ops in the same order.

NumPy arrays are what the shared submission layer (horovod/common: handles, array_ops) takes
and returns, so this frontend is that layer's collectives as they are. Device arrays (CuPy,
torch CUDA tensors, anything with __cuda_array_interface__ or __dlpack__) are taken too.
"""

from horovod.common import basics as _b
from horovod.common.api import *  # noqa: F403  (init, rank, ProcessSet, Sum, ...)
from horovod.common.array_ops import (  # noqa: F401  (the API)
    allgather,
    allgather_async,
    allgather_object,
    allreduce,
    allreduce_async,
    alltoall,
    alltoall_async,
    broadcast,
    broadcast_async,
    broadcast_object,
    grouped_allreduce,
    grouped_allreduce_async,
    reducescatter,
    reducescatter_async,
)
from horovod.common.handles import Handle, poll, synchronize  # noqa: F401


def ring_allreduce_raw(array):
    """The bare ring (float32 sum, in place) on its own communicator, bypassing negotiation.
    For benchmarks only."""
    if not _b.is_initialized():
        raise ValueError(_b._NOT_INITIALIZED)
    _b._lib().ring_allreduce_raw(array)
