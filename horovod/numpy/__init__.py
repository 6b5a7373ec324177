"""Horovod for NumPy arrays: the framework-neutral frontend (`import horovod.numpy as hvd`).

Every op has a blocking form and an `_async` form returning a handle for `poll`/`synchronize`.
Ops are matched across ranks by name; pass stable names (e.g. "grad/layer1") so that repeated
steps take the engine's cached fast path. Unnamed ops get a per-process counter name, which
matches across ranks only if every rank issues unnamed ops in the same order.
"""
import itertools

import numpy as np

from horovod.common import basics as _b
from horovod.common.basics import (  # noqa: F401  (re-exported API)
    Average, Max, Min, Product, Sum, build_info, cross_rank, cross_size, cuda_built, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, shutdown, size)
from horovod.common.exceptions import (  # noqa: F401
    HorovodInternalError, HorovodMismatchError, HorovodShutdownError)

_ALLREDUCE, _ALLGATHER, _BROADCAST, _ALLTOALL, _REDUCESCATTER = range(5)
_KIND_NAMES = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]
_DTYPES = {"uint8": 0, "int8": 1, "int32": 2, "int64": 3, "float16": 4, "bfloat16": 5,
           "float32": 6, "float64": 7}
_counters = {k: itertools.count() for k in _KIND_NAMES}


class Handle:
    """An op in flight. Keep it and pass it to synchronize(); poll() says if it is done."""
    __slots__ = ("_ids", "_kind", "_grouped")

    def __init__(self, ids, kind, grouped=False):
        self._ids, self._kind, self._grouped = ids, kind, grouped


def _dtype_code(t, name):
    code = _DTYPES.get(t.dtype.name)
    if code is None:
        raise ValueError(f"tensor '{name}': dtype {t.dtype} is not supported; use one of "
                         f"{', '.join(_DTYPES)}")
    return code


def _op_code(op, name):
    if op == _b.Adasum:
        raise ValueError(f"tensor '{name}': Adasum is not implemented in this Horovod")
    if op not in (Sum, Average, Min, Max, Product):
        raise ValueError(f"tensor '{name}': unknown reduce op {op!r}")
    return int(op)


def _name(kind, name):
    if not is_initialized():
        raise ValueError(_b._NOT_INITIALIZED)
    return name if name is not None else f"{_KIND_NAMES[kind]}.noname.{next(_counters[_KIND_NAMES[kind]])}"


def _spec(kind, name, tensor, out=None, op=Sum, root=0, prescale=1.0, postscale=1.0, splits=()):
    t = np.require(tensor, requirements="C")
    dtype = _dtype_code(t, name)
    if out is not None:
        if out.dtype != t.dtype or out.shape != t.shape:
            raise ValueError(f"tensor '{name}': out must have dtype {t.dtype} and shape {t.shape}")
    return (kind, name, t, out, dtype, _op_code(op, name), int(root), float(prescale),
            float(postscale), [int(s) for s in splits])


def _submit(specs, kind, grouped=False):
    return Handle(_b._lib().enqueue(specs), kind, grouped)


def poll(handle):
    """True once the op has finished (successfully or not)."""
    return all(_b._lib().poll(i) for i in handle._ids)


def synchronize(handle, timeout=None):
    """Waits for the op and returns its result; raises its error (HorovodMismatchError,
    HorovodShutdownError, ...). `timeout` in seconds raises TimeoutError naming the tensor."""
    t = -1.0 if timeout is None else float(timeout)
    results = [_b._lib().wait(i, t) for i in handle._ids]
    if handle._grouped:
        return [r[0] for r in results]
    out, splits = results[0]
    if handle._kind == _ALLTOALL:
        return out, np.asarray(splits if splits is not None else [0] * size(), dtype=np.int64)
    return out


def allreduce_async(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                    out=None):
    name = _name(_ALLREDUCE, name)
    t = np.require(tensor, requirements="C")
    out = np.empty_like(t) if out is None else out
    return _submit([_spec(_ALLREDUCE, name, t, out, op, 0, prescale_factor, postscale_factor)],
                   _ALLREDUCE)


def allreduce(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, out=None):
    """Reduces `tensor` across ranks (Average by default; Sum, Min, Max, Product). `out` may be
    a preallocated array, or `tensor` itself for an in-place reduction."""
    return synchronize(allreduce_async(tensor, op, name, prescale_factor, postscale_factor, out))


def grouped_allreduce_async(tensors, op=Average, name=None, prescale_factor=1.0,
                            postscale_factor=1.0):
    base = _name(_ALLREDUCE, name)
    specs = []
    for i, tensor in enumerate(tensors):
        t = np.require(tensor, requirements="C")
        specs.append(_spec(_ALLREDUCE, f"{base}.{i}", t, np.empty_like(t), op, 0,
                           prescale_factor, postscale_factor))
    return _submit(specs, _ALLREDUCE, grouped=True)


def grouped_allreduce(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces a list of tensors submitted together (one negotiation, fused when they fit)."""
    return synchronize(grouped_allreduce_async(tensors, op, name, prescale_factor,
                                               postscale_factor))


def allgather_async(tensor, name=None):
    name = _name(_ALLGATHER, name)
    return _submit([_spec(_ALLGATHER, name, tensor)], _ALLGATHER)


def allgather(tensor, name=None):
    """Concatenates every rank's tensor along the first dimension, which may differ per rank."""
    return synchronize(allgather_async(tensor, name))


def broadcast_async(tensor, root_rank, name=None, out=None):
    name = _name(_BROADCAST, name)
    t = np.require(tensor, requirements="C")
    out = np.empty_like(t) if out is None else out
    return _submit([_spec(_BROADCAST, name, t, out, Sum, root_rank)], _BROADCAST)


def broadcast(tensor, root_rank, name=None, out=None):
    """Returns root_rank's tensor on every rank."""
    return synchronize(broadcast_async(tensor, root_rank, name, out))


def alltoall_async(tensor, splits=None, name=None):
    name = _name(_ALLTOALL, name)
    t = np.require(tensor, requirements="C")
    if splits is None:
        if t.ndim == 0:
            raise ValueError(f"tensor '{name}': alltoall needs at least one dimension")
        n = size()
        splits = [t.shape[0] // n + (1 if r < t.shape[0] % n else 0) for r in range(n)]
    return _submit([_spec(_ALLTOALL, name, t, splits=list(np.asarray(splits).reshape(-1)))],
                   _ALLTOALL)


def alltoall(tensor, splits=None, name=None):
    """Sends splits[r] rows of `tensor` to rank r (even splits by default); returns the rows
    received, ordered by sender, and how many came from each rank."""
    return synchronize(alltoall_async(tensor, splits, name))


def reducescatter_async(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    name = _name(_REDUCESCATTER, name)
    return _submit([_spec(_REDUCESCATTER, name, tensor, None, op, 0, prescale_factor,
                          postscale_factor)], _REDUCESCATTER)


def reducescatter(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces across ranks and returns this rank's block of rows (the first ranks get one
    extra row when the first dimension does not divide evenly)."""
    return synchronize(reducescatter_async(tensor, op, name, prescale_factor, postscale_factor))


def ring_allreduce_raw(array):
    """The bare ring (float32 sum, in place) on its own communicator, bypassing negotiation.
    For benchmarks only."""
    if not is_initialized():
        raise ValueError(_b._NOT_INITIALIZED)
    _b._lib().ring_allreduce_raw(array)
