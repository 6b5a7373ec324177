"""Horovod for NumPy arrays: the framework-neutral frontend (`import horovod.numpy as hvd`).

Every op has a blocking form and an `_async` form returning a handle for `poll`/`synchronize`.
Ops are matched across ranks by name; pass stable names (e.g. "grad/layer1") so that repeated
steps take the engine's cached fast path. Unnamed ops get a per-process counter name, which
matches across ranks only if every rank issues unnamed ops in the same order.
"""

import functools
import itertools
import operator

import numpy as np

from horovod.common import basics as _b
from horovod.common import device as _device
from horovod.common.basics import (  # noqa: F401  (re-exported API)
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    build_info,
    cross_rank,
    cross_size,
    cuda_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    join,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    shutdown,
    size,
)
from horovod.common.exceptions import (  # noqa: F401
    HorovodInternalError,
    HorovodMismatchError,
    HorovodShutdownError,
)
from horovod.common.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)
from horovod.common.process_sets import process_set_id as _process_set_id
from horovod.common.process_sets import set_size as _set_size

_ALLREDUCE, _ALLGATHER, _BROADCAST, _ALLTOALL, _REDUCESCATTER = range(5)
_KIND_NAMES = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]
_counters = {}  # (kind, process set id) -> counter of unnamed ops
_DTYPE = operator.attrgetter("dtype")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_NO_SPLITS = []  # the splits argument of ops other than alltoall (never changed)


class Handle:
    """An op in flight. Keep it and pass it to synchronize(); poll() says if it is done.
    Dropping it unsynchronized is allowed: its buffers are freed once the op is done."""

    __slots__ = ("_id", "_kind", "_grouped", "_name", "_refused", "_devices")

    def __init__(self, id_, kind, name, grouped=False, refused=None, devices=None):
        self._id, self._kind, self._name, self._grouped = id_, kind, name, grouped
        self._refused = refused  # this rank's own argument error, raised once the op fails
        self._devices = devices  # device arrays: their DeviceTensors, to return the same kind

    def __del__(self):
        # Also runs at interpreter exit, when module globals may be gone: never raise.
        try:
            if self._id is not None:
                _b._core.release(self._id)
        except Exception:  # noqa: BLE001
            pass

    def _live_id(self):
        if self._id is None:
            what = f"tensor '{self._name}'" + (" and its group" if self._grouped else "")
            raise ValueError(f"handle of {what} was already synchronized")
        return self._id


def _name(kind, name, process_set=None):
    """The op's name; unnamed ops are counted per process set (only its members advance its
    counter, so the other sets' names stay alike on every rank)."""
    if not is_initialized():
        raise ValueError(_b._NOT_INITIALIZED)
    if name is None:
        key = (_KIND_NAMES[kind], getattr(process_set, "process_set_id", 0) or 0)
        counter = _counters.setdefault(key, itertools.count())
        return f"{_KIND_NAMES[kind]}.noname.{next(counter)}"
    if not isinstance(name, str):
        raise TypeError(f"a tensor name must be a str, got {type(name).__name__} {name!r}")
    return name


def _array(name, tensor):
    """`tensor` as an ndarray in native byte order: the engine reduces native values, so a
    byte-swapped input is converted (the result comes back native)."""
    try:
        a = np.asarray(tensor)
    except (TypeError, ValueError) as e:
        raise TypeError(f"tensor '{name}': input is not array-like: {e}") from None
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _try_describe(tensor):
    """A device array's DeviceTensor (its shape and ndim), or None: _submit refuses it."""
    try:
        return _device.describe("", tensor)
    except (TypeError, ValueError):
        return None


def _try_array(tensor):
    try:
        return np.asarray(tensor)
    except (TypeError, ValueError):
        return None


def _real(name, what, value):
    if not isinstance(value, (str, bytes, bytearray)):  # float('2') would accept a string
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            pass
    raise TypeError(f"tensor '{name}': {what} must be a real number, got {value!r}")


def _root(name, root):
    try:
        root = operator.index(root)  # ints and NumPy integers; 1.5 is not silently 1
    except TypeError:
        raise TypeError(f"tensor '{name}': root_rank must be an integer, got {root!r}") from None
    if not _INT32_MIN <= root <= _INT32_MAX:  # the engine checks [0, size) on an int32
        raise ValueError(f"tensor '{name}': broadcast root rank {root} is outside [0, {size()})")
    return root


def _split_values(splits):
    """(alltoall splits as a list of int64 values, "") or ([], why they cannot be used), read
    as given (no conversion first); the engine checks count, sign and sum."""
    try:
        a = np.asarray(splits, dtype=object)
    except (TypeError, ValueError) as e:
        return [], f"alltoall splits are not array-like: {e}"
    if a.ndim != 1:
        return [], (
            f"alltoall splits must be 1-D (one split per rank), got shape {list(a.shape)}: "
            f"{splits!r}"
        )
    out = []
    for s in a:
        try:
            v = operator.index(s)
        except TypeError:
            return [], f"alltoall splits must be integers, got {s!r}"
        if not _INT64_MIN <= v <= _INT64_MAX:
            return [], f"alltoall split {v} does not fit in int64"
        out.append(v)
    return out, ""


def _splits(name, splits):
    """alltoall splits as a list of int64 values; raises the reason they cannot be, naming the
    tensor (alltoall itself negotiates it instead, so that every rank fails with it)."""
    out, why = _split_values(splits)
    if why:
        raise (TypeError if "integers" in why else ValueError)(f"tensor '{name}': {why}")
    return out


class _Refused(Exception):
    """A bad argument found on this rank: the op is still submitted, carrying the reason, so
    that every rank fails with it instead of the other ranks waiting for this one."""


def _local_check(fn, *args):
    """fn(*args), with its TypeError/ValueError kept for _submit (raised on this rank when the
    negotiated op fails) instead of raised before the op is submitted."""
    try:
        return fn(*args)
    except (TypeError, ValueError) as e:
        raise _Refused(e) from None


def _reduce_op(name, op):
    if op in _b.REDUCE_OPS:
        return op
    raise ValueError(f"tensor '{name}': unknown reduce op {op!r}")


_NONE_TYPE = type(None)


def _plain(tensors, outs):
    """(arrays, outputs) without per-tensor checks when every tensor is a NumPy array in native
    byte order and every out is None (outputs None: the binding allocates them) or a NumPy
    array; else None, and _submit checks each tensor. Two Python calls per tensor were most of
    a grouped op's time for many small tensors; these checks run at C speed (map, set)."""
    if len(tensors) == 1:  # the usual single-tensor call: no sets to build
        t = tensors[0]
        if type(t) is not np.ndarray or not t.dtype.isnative:
            return None
        if outs is None:
            return tensors, None
        o = outs[0]
        if o is None:
            return tensors, None  # the binding allocates it
        return (tensors, outs) if type(o) is np.ndarray else None
    if set(map(type, tensors)) != {np.ndarray}:
        return None
    if not all(dt.isnative for dt in set(map(_DTYPE, tensors))):
        return None
    if outs is None:
        return tensors, None
    kinds = set(map(type, outs))
    if kinds == {_NONE_TYPE}:
        return tensors, None  # the binding allocates them, in one block (output_blocks.h)
    if kinds == {np.ndarray}:
        return tensors, outs
    return None


def _submit(
    kind,
    names,
    tensors,
    outs=None,
    op=Sum,
    root=0,
    prescale=1.0,
    postscale=1.0,
    splits=(),
    group="",
    invalid="",
    process_set=None,
):
    """Checks the arguments and queues the op. `outs`: None (the engine allocates outputs), or
    one output array (or None: a new one) per tensor. A bad argument is not raised here: the op
    is queued with the reason and fails on every rank; this rank then raises its own error."""
    name = names[0] if names else ""
    refused = None
    devices = None
    try:
        plain = _plain(tensors, outs)
        if plain is not None:
            arrays, outputs = plain
        elif any(_device.is_device_array(t) for t in tensors):
            devices = [_local_check(_device_arg, n, t) for n, t in zip(names, tensors)]
            outputs = [None] * len(names)
            if outs is not None:
                outputs = [
                    _local_check(_device.output_for, n, d, o)
                    for n, d, o in zip(names, devices, outs)
                ]
        else:
            arrays = [_local_check(_array, n, t) for n, t in zip(names, tensors)]
            outputs = None
            if outs is not None:
                outputs = [_local_check(_like, n, a, o) for n, a, o in zip(names, arrays, outs)]
        args = (
            int(_local_check(_reduce_op, name, op)),
            _local_check(_root, name, root),
            _local_check(_real, name, "prescale_factor", prescale),
            _local_check(_real, name, "postscale_factor", postscale),
        )
    except _Refused as r:
        refused = r.args[0]
        # The reason without "tensor '<name>': ", which the engine's message puts in front.
        invalid = str(refused).split("': ", 1)[-1]
        devices = None
        arrays, outputs, args = (
            [np.zeros(0, np.uint8) for _ in names],
            None,
            (int(Sum), 0, 1.0, 1.0),
        )
    if devices is not None:
        hid = _b._lib().enqueue_device(
            kind,
            names,
            [d.entry() for d in devices],
            outputs,
            *args,
            list(splits),
            invalid=invalid,
            group=group,
            process_set=_process_set_id(process_set),
        )
        return Handle(hid, kind, name, bool(group), None, devices)
    hid = _b._lib().enqueue(
        kind,
        names,
        arrays,
        outputs,
        *args,
        list(splits),
        invalid=invalid,
        group=group,
        process_set=_process_set_id(process_set),
    )
    return Handle(hid, kind, name, bool(group), refused)


def poll(handle):
    """True once the op has finished (successfully or not)."""
    return _b._lib().poll(handle._live_id())


def synchronize(handle, timeout=None):
    """Waits for the op and returns its result; raises its error (HorovodMismatchError,
    HorovodShutdownError, ...). `timeout` in seconds raises TimeoutError naming the tensor;
    the handle can then be synchronized again."""
    hid = handle._live_id()
    timeout = -1.0 if timeout is None else _real(handle._name, "timeout", timeout)
    try:
        results = _b._lib().wait(hid, timeout)
    except ValueError:
        if handle._refused is None:
            raise
        # Every rank failed the op with this rank's reason; this rank raises its own error
        # (TypeError or ValueError, as the check made it).
        handle._id = None
        raise handle._refused from None
    handle._id = None  # the binding has released it
    if handle._devices is not None:
        results = [(_device.result(d, r[0]), r[1]) for d, r in zip(handle._devices, results)]
    if handle._grouped:
        return [r[0] for r in results]
    out, splits = results[0]
    if handle._kind == _ALLTOALL:
        return out, np.asarray(splits if splits is not None else [0] * size(), dtype=np.int64)
    return out


def _device_arg(name, tensor):
    """A device array's DeviceTensor; a host array in a call with device arrays is refused."""
    if not _device.is_device_array(tensor):
        raise TypeError(
            f"tensor '{name}': a call with device arrays takes only device arrays, got "
            f"{type(tensor).__name__}"
        )
    return _device.describe(name, tensor)


def _like(name, t, out):
    """The output array of a same-shape op: `out` if given, else a new one."""
    if out is None:
        return np.empty(t.shape, t.dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"tensor '{name}': out must be a NumPy array, got {type(out).__name__}")
    return out


def _plain_args(op, prescale, postscale):
    """An op and factors that need no check or conversion (what _submit would find)."""
    return type(prescale) is float and type(postscale) is float and op in _b.REDUCE_OPS


def _allreduce_now(names, tensors, outs, op, prescale, postscale, group, process_set):
    """The blocking allreduce of plain arrays (_plain, _plain_args): one call into the binding,
    which queues the op and waits, and no handle. On one rank a 4 KiB op took 8-10 us through
    the handle's path, 5.4 us so (docs/benchmarks.md). Returns each tensor's output."""
    results = _b._lib().enqueue_wait(
        _ALLREDUCE,
        names,
        tensors,
        outs,
        int(op),
        0,
        prescale,
        postscale,
        _NO_SPLITS,
        -1,
        "",
        group,
        _process_set_id(process_set),
    )
    return [r[0] for r in results]


def allreduce_async(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    out=None,
    process_set=global_process_set,
):
    name = _name(_ALLREDUCE, name, process_set)
    return _submit(
        _ALLREDUCE,
        [name],
        [tensor],
        [out],
        op,
        0,
        prescale_factor,
        postscale_factor,
        process_set=process_set,
    )


def allreduce(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    out=None,
    process_set=global_process_set,
):
    """Reduces `tensor` across ranks (Average by default; Sum, Min, Max, Product, Adasum). `out`
    may be a preallocated array, or `tensor` itself for an in-place reduction. Adasum (floating
    dtypes, a power-of-two number of ranks) returns its combination as it is: no division.
    With `process_set`, among its ranks only (every op takes it)."""
    outs = None if out is None else [out]
    if _plain_args(op, prescale_factor, postscale_factor) and _plain([tensor], outs) is not None:
        name = _name(_ALLREDUCE, name, process_set)
        return _allreduce_now(
            [name], [tensor], outs, op, prescale_factor, postscale_factor, "", process_set
        )[0]
    return synchronize(
        allreduce_async(tensor, op, name, prescale_factor, postscale_factor, out, process_set)
    )


@functools.lru_cache(maxsize=256)
def _group_names(base, n):
    """The names of a group's tensors: the same every step for a named group, so kept."""
    return tuple(f"{base}.{i}" for i in range(n))


def grouped_allreduce_async(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    base = _name(_ALLREDUCE, name, process_set)
    tensors = list(tensors)
    names = _group_names(base, len(tensors))
    return _submit(
        _ALLREDUCE,
        names,
        tensors,
        [None] * len(tensors),
        op,
        0,
        prescale_factor,
        postscale_factor,
        group=base,
        process_set=process_set,
    )


def grouped_allreduce(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces a list of tensors submitted together (one negotiation, fused when they fit)."""
    tensors = list(tensors)
    if (
        tensors
        and _plain_args(op, prescale_factor, postscale_factor)
        and _plain(tensors, None) is not None
    ):
        base = _name(_ALLREDUCE, name, process_set)
        names = _group_names(base, len(tensors))
        return _allreduce_now(
            names, tensors, None, op, prescale_factor, postscale_factor, base, process_set
        )
    return synchronize(
        grouped_allreduce_async(tensors, op, name, prescale_factor, postscale_factor, process_set)
    )


def allgather_async(tensor, name=None, process_set=global_process_set):
    name = _name(_ALLGATHER, name, process_set)
    return _submit(_ALLGATHER, [name], [tensor], process_set=process_set)


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension, which may differ per rank
    (in the order of the ranks in the set)."""
    return synchronize(allgather_async(tensor, name, process_set))


def broadcast_async(tensor, root_rank, name=None, out=None, process_set=global_process_set):
    name = _name(_BROADCAST, name, process_set)
    return _submit(_BROADCAST, [name], [tensor], [out], Sum, root_rank, process_set=process_set)


def broadcast(tensor, root_rank, name=None, out=None, process_set=global_process_set):
    """Returns root_rank's tensor on every rank. root_rank is a global rank (hvd.rank()), also
    with a process set, as upstream."""
    return synchronize(broadcast_async(tensor, root_rank, name, out, process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    # Bad splits, or a scalar, are not raised here: the op is submitted with the reason, which
    # the engine negotiates, so every rank fails with it instead of waiting for this one.
    name = _name(_ALLTOALL, name, process_set)
    n = _set_size(process_set)
    if _device.is_device_array(tensor):
        t = _try_describe(tensor)
    else:
        t = np.asarray(tensor) if isinstance(tensor, np.ndarray) else _try_array(tensor)
    if splits is not None:
        values, why = _split_values(splits)
    elif t is None:
        values, why = [], ""  # _submit refuses the input itself
    elif t.ndim == 0:
        values, why = [], "alltoall needs at least one dimension"
    elif t.shape[0] % n:
        # Refused as upstream (and horovod.tensorflow) refuse it, on every rank, rather than
        # split unevenly.
        values, why = (
            [],
            (
                "alltoall without splits needs a first dimension divisible by the number of ranks "
                f"({n}), got {t.shape[0]} rows; pass splits to send uneven rows"
            ),
        )
    else:
        values, why = [t.shape[0] // n] * n, ""
    return _submit(_ALLTOALL, [name], [tensor], splits=values, invalid=why, process_set=process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of `tensor` to rank r; returns the rows received, ordered by
    sender, and how many came from each rank (also without `splits`, unlike
    horovod.tensorflow's: one return shape for both forms). Without `splits` the first
    dimension is split evenly; one the number of ranks does not divide is a ValueError on every
    rank."""
    return synchronize(alltoall_async(tensor, splits, name, process_set))


def reducescatter_async(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    name = _name(_REDUCESCATTER, name, process_set)
    return _submit(
        _REDUCESCATTER,
        [name],
        [tensor],
        None,
        op,
        0,
        prescale_factor,
        postscale_factor,
        process_set=process_set,
    )


def reducescatter(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces across ranks and returns this rank's block of rows (the first ranks get one
    extra row when the first dimension does not divide evenly)."""
    return synchronize(
        reducescatter_async(tensor, op, name, prescale_factor, postscale_factor, process_set)
    )


def ring_allreduce_raw(array):
    """The bare ring (float32 sum, in place) on its own communicator, bypassing negotiation.
    For benchmarks only."""
    if not is_initialized():
        raise ValueError(_b._NOT_INITIALIZED)
    _b._lib().ring_allreduce_raw(array)
