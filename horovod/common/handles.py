"""Submitting an op to the engine and waiting for it: what every frontend's collectives go
through. A frontend hands over host tensors as NumPy arrays (its `host` converter: a view
through the buffer protocol or DLPack, no copy) and device tensors as they are (common/device.py
reads their pointer and stream); it gets NumPy arrays back, or its own type through `wrap`.

Arguments are checked here (arguments.py). A bad one is not raised at once: the op is queued
with the reason and fails on every rank, then this rank raises its own TypeError/ValueError;
raised on one rank only, it would leave the others waiting for the op."""

import operator

import numpy as np

from horovod.common import arguments as _args
from horovod.common import device as _device
from horovod.common import engine_types as _types
from horovod.common.exceptions import MixedDevicesError
from horovod.common.process_sets import ProcessSet
from horovod.common.process_sets import process_set_id as _process_set_id

_core = _types._core
_DTYPE = operator.attrgetter("dtype")
_NONE_TYPE = type(None)
_NO_SPLITS = []  # the splits argument of ops other than alltoall (never changed)


class Handle:
    """An op in flight. Keep it and pass it to synchronize(); poll() says if it is done.
    Dropping it unsynchronized is allowed: its buffers are freed once the op is done."""

    __slots__ = ("_id", "_kind", "_name", "_count", "_grouped", "_refused", "_devices", "_wrap")

    def __init__(self, id_, kind, name, count, grouped, refused=None, devices=None, wrap=None):
        self._id, self._kind, self._name, self._count = id_, kind, name, count
        self._grouped = grouped
        self._refused = refused  # this rank's own argument error, raised once the op fails
        self._devices = devices  # device arrays: their DeviceTensors, to return the same kind
        self._wrap = wrap  # the frontend's own type for each output, or None: NumPy arrays

    def __del__(self):
        # Also runs at interpreter exit, when module globals may be gone: never raise.
        try:
            if self._id is not None:
                _core.release(self._id)
        except Exception:  # noqa: BLE001
            pass

    def _described(self):
        first = _core.member_name(self._name, 0, max(self._count, 1), self._grouped)
        return f"tensor '{first}'" + (" and its group" if self._grouped else "")

    def _live_id(self):
        if self._id is None:
            raise ValueError(f"handle of {self._described()} was already synchronized")
        return self._id


def as_array(tensor):
    """`tensor` as an ndarray in native byte order (NumPy's own `host` converter): the engine
    reduces native values, so a byte-swapped input is converted (the result comes back
    native)."""
    try:
        a = np.asarray(tensor)
    except (TypeError, ValueError) as e:
        raise TypeError(f"input is not array-like: {e}") from None
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _like(t, out):
    """The output array of a same-shape op: `out` if given, else a new one."""
    if out is None:
        return np.empty(t.shape, t.dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array, got {type(out).__name__}")
    return out


def _device_arg(name, tensor):
    """A device array's DeviceTensor; a host array in a call with device arrays is refused."""
    if not _device.is_device_array(tensor):
        raise MixedDevicesError(
            f"a call with device arrays takes only device arrays, got {type(tensor).__name__}"
        )
    return _device.describe(name, tensor)


def plain(tensors, outs):
    """(arrays, outputs) without per-tensor checks when every tensor is a NumPy array in native
    byte order and every out is None (outputs None: the binding allocates them) or a NumPy
    array; else None, and submit checks each tensor. Two Python calls per tensor were most of
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


plain_args = _args.plain_reduction_args


def _each(name, grouped, items, fn):
    """[fn(member name, *item)] with the error of a member named by it (Refused)."""
    n = len(items)
    out = []
    for i, item in enumerate(items):
        try:
            out.append(fn(*item))
        except (TypeError, ValueError) as e:
            member = _core.member_name(name, i, n, grouped)
            raise _args.Refused.of(member, e) from None
    return out


def _not_a_set(process_set):
    return process_set is not None and not isinstance(process_set, ProcessSet)


def _first_member(name, tensors, grouped):
    """The name of an op's first tensor, which the engine names the op's errors by."""
    return _core.member_name(name, 0, max(len(tensors), 1), grouped)


def _host_inputs(name, tensors, outs, grouped, host):
    """(arrays, outputs) of host tensors: each tensor through `host`; each output given (None:
    a new one) checked against its input, or None when no outputs are given (the engine
    allocates them)."""
    arrays = _each(name, grouped, [(t,) for t in tensors], host)
    if outs is None:
        return arrays, None
    pairs = [(a, o if o is None or host is as_array else host(o)) for a, o in zip(arrays, outs)]
    return arrays, _each(name, grouped, pairs, _like)


def _device_inputs(name, tensors, outs, grouped):
    """(DeviceTensors, outputs) of device arrays; outputs None each where the engine
    allocates them."""
    members = [_core.member_name(name, i, len(tensors), grouped) for i in range(len(tensors))]
    devices = _each(name, grouped, list(zip(members, tensors)), _device_arg)
    if outs is None:
        return devices, [None] * len(tensors)
    return devices, _each(name, grouped, list(zip(members, devices, outs)), _device.output_for)


def _inputs(name, tensors, outs, grouped, host):
    """(arrays, outputs, devices): host tensors as NumPy arrays (devices None), or device
    arrays as their DeviceTensors (arrays None). A bad member raises Refused naming it."""
    plain_ = plain(tensors, outs) if host is as_array else None
    if plain_ is not None:
        arrays, outputs = plain_
        return arrays, outputs, None
    if any(_device.is_device_array(t) for t in tensors):
        devices, outputs = _device_inputs(name, tensors, outs, grouped)
        return None, outputs, devices
    arrays, outputs = _host_inputs(name, tensors, outs, grouped, host)
    return arrays, outputs, None


def _engine_args(name, tensors, grouped, op, root, prescale, postscale):
    """(reduce op, root rank, prescale, postscale) as the engine takes them; a bad one raises
    Refused, named by the first tensor, as the engine names it."""
    try:
        return (
            int(_args.reduce_op(op)),
            _args.root_rank(root),
            _args.real_factor("prescale_factor", prescale),
            _args.real_factor("postscale_factor", postscale),
        )
    except (TypeError, ValueError) as e:
        raise _args.Refused.of(_first_member(name, tensors, grouped), e) from None


def submit(
    op_type,
    name,
    tensors,
    outs=None,
    op=_types.Sum,
    root=0,
    prescale=1.0,
    postscale=1.0,
    splits=(),
    grouped=False,
    invalid="",
    process_set=None,
    host=as_array,
    wrap=None,
):
    """Checks the arguments and queues the op; returns its Handle. `name`: the op's name (a
    group's tensors are "<name>.<i>"). `outs`: None (the engine allocates outputs), or one
    output (or None: a new one) per tensor. `host`: the frontend's tensor -> NumPy array
    (raising TypeError for what it cannot take); `wrap`: NumPy array -> the frontend's tensor.
    A bad argument is not raised here: the op is queued with the reason and fails on every
    rank; synchronize then raises this rank's own error."""
    refused = None
    # Not a process set at all (a str, a number) on one rank: refused like a bad tensor, and
    # negotiated in the global set, where the ranks that passed a good one most likely are
    # (raised on this rank alone, it left them waiting). A ProcessSet unknown to the engine (a
    # removed one) is the same on every rank that holds it: raised at once, as before.
    not_a_set = _not_a_set(process_set)
    pid = 0 if not_a_set else _process_set_id(process_set)
    try:
        if not_a_set:  # raises its Refused, named by the first tensor
            _args.checked(_first_member(name, tensors, grouped), _process_set_id, process_set)
        arrays, outputs, devices = _inputs(name, tensors, outs, grouped, host)
        args = _engine_args(name, tensors, grouped, op, root, prescale, postscale)
    except _args.Refused as r:
        refused = r.args[0]
        invalid = _args.bare(refused)
        # The op only carries the reason to every rank: empty host placeholders.
        arrays, outputs, devices = [np.zeros(0, np.uint8) for _ in tensors], None, None
        args = (int(_types.Sum), 0, 1.0, 1.0)
    # Device arrays go in as their (pointer, stream, ...) entries, host arrays as they are; a
    # refused op is always the host kind (empty placeholders).
    enqueue = _core.enqueue if devices is None else _core.enqueue_device
    inputs = arrays if devices is None else [d.entry() for d in devices]
    hid = enqueue(
        op_type,
        name,
        inputs,
        outputs,
        *args,
        list(splits),
        invalid=invalid,
        group=name if grouped else "",
        process_set=pid,
    )
    return Handle(hid, op_type, name, len(tensors), grouped, refused, devices, wrap)


def poll(handle):
    """True once the op has finished (successfully or not)."""
    return _core.poll(handle._live_id())


def synchronize(handle, timeout=None):
    """Waits for the op and returns its result; raises its error (HorovodMismatchError,
    HorovodShutdownError, ...). `timeout` in seconds raises TimeoutError naming the tensor;
    the handle can then be synchronized again. Results: the output (a list for a grouped op;
    (output, received splits) for alltoall), in the frontend's type if it gave `wrap`."""
    hid = handle._live_id()
    if timeout is None:
        timeout = -1.0
    else:
        try:
            timeout = _args.real_factor("timeout", timeout)
        except TypeError as e:
            first = _core.member_name(handle._name, 0, max(handle._count, 1), handle._grouped)
            raise TypeError(f"tensor '{first}': {e}") from None
    try:
        results = _core.wait(hid, timeout)
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
    wrap = handle._wrap
    if handle._grouped:
        return [r[0] for r in results] if wrap is None else [wrap(r[0]) for r in results]
    out, splits = results[0]
    if wrap is not None:
        out = wrap(out)
    if handle._kind == _types.ALLTOALL:
        n = _core.topology()["size"] if splits is None else 0
        splits = np.asarray(splits if splits is not None else [0] * n, dtype=np.int64)
        return out, (splits if wrap is None else wrap(splits))
    return out


def allreduce_now(name, tensors, outs, op, prescale, postscale, grouped, process_set):
    """The blocking allreduce of plain arrays (plain, plain_args): one call into the binding,
    which queues the op and waits, and no handle. On one rank a 4 KiB op took 8-10 us through
    the handle's path, 5.4 us so (docs/benchmarks.md). Returns each tensor's output."""
    if _not_a_set(process_set):  # refused on every rank by the general path (submit)
        out = synchronize(
            submit(
                _types.ALLREDUCE,
                name,
                tensors,
                outs,
                op,
                0,
                prescale,
                postscale,
                grouped=grouped,
                process_set=process_set,
            )
        )
        return out if grouped else [out]
    pid = _process_set_id(process_set)
    results = _core.enqueue_wait(
        _types.ALLREDUCE,
        name,
        tensors,
        outs,
        int(op),
        0,
        prescale,
        postscale,
        _NO_SPLITS,
        -1,
        "",
        name if grouped else "",
        pid,
    )
    return [r[0] for r in results]
