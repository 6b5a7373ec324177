"""Every collective over host arrays and device arrays, with handles, names, argument checks and
process sets: horovod.numpy is these functions as they are; another frontend passes `host` (its
tensor -> a NumPy array, no copy) and `wrap` (a NumPy array -> its tensor), keyword-only.

Every op has a blocking form and an `_async` form returning a handle for `poll`/`synchronize`.
Ops are matched across ranks by name (naming.py)."""

from horovod.common import arguments as _args
from horovod.common import basics as _basics
from horovod.common import device as _device
from horovod.common import handles as _h
from horovod.common import naming as _naming
from horovod.common.engine_types import (
    ALLGATHER,
    ALLREDUCE,
    ALLTOALL,
    BROADCAST,
    REDUCESCATTER,
    Average,
    Sum,
)
from horovod.common.process_sets import global_process_set
from horovod.common.process_sets import set_size as _set_size

as_array = _h.as_array


def allreduce_async(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    out=None,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    name = _naming.op_name(ALLREDUCE, name, process_set)
    return _h.submit(
        ALLREDUCE,
        name,
        [tensor],
        [out],
        op,
        0,
        prescale_factor,
        postscale_factor,
        process_set=process_set,
        host=host,
        wrap=wrap,
    )


def allreduce(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    out=None,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    """Reduces `tensor` across ranks (Average by default; Sum, Min, Max, Product, Adasum). `out`
    may be a preallocated array, or `tensor` itself for an in-place reduction. Adasum (floating
    dtypes, a power-of-two number of ranks) returns its combination as it is: no division.
    With `process_set`, among its ranks only (every op takes it)."""
    if host is as_array:
        outs = None if out is None else [out]
        if _h.plain_args(op, prescale_factor, postscale_factor) and _h.plain([tensor], outs):
            name = _naming.op_name(ALLREDUCE, name, process_set)
            return _h.allreduce_now(
                name, [tensor], outs, op, prescale_factor, postscale_factor, False, process_set
            )[0]
    return _h.synchronize(
        allreduce_async(
            tensor,
            op,
            name,
            prescale_factor,
            postscale_factor,
            out,
            process_set,
            host=host,
            wrap=wrap,
        )
    )


def grouped_allreduce_async(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    name = _naming.op_name(ALLREDUCE, name, process_set)
    tensors = list(tensors)
    return _h.submit(
        ALLREDUCE,
        name,
        tensors,
        [None] * len(tensors),
        op,
        0,
        prescale_factor,
        postscale_factor,
        grouped=True,
        process_set=process_set,
        host=host,
        wrap=wrap,
    )


def grouped_allreduce(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    """Reduces a list of tensors submitted together (one negotiation, fused when they fit)."""
    tensors = list(tensors)
    if (
        host is as_array
        and tensors
        and _h.plain_args(op, prescale_factor, postscale_factor)
        and _h.plain(tensors, None) is not None
    ):
        name = _naming.op_name(ALLREDUCE, name, process_set)
        return _h.allreduce_now(
            name, tensors, None, op, prescale_factor, postscale_factor, True, process_set
        )
    return _h.synchronize(
        grouped_allreduce_async(
            tensors,
            op,
            name,
            prescale_factor,
            postscale_factor,
            process_set,
            host=host,
            wrap=wrap,
        )
    )


def allgather_async(tensor, name=None, process_set=global_process_set, *, host=as_array, wrap=None):
    name = _naming.op_name(ALLGATHER, name, process_set)
    return _h.submit(ALLGATHER, name, [tensor], process_set=process_set, host=host, wrap=wrap)


def allgather(tensor, name=None, process_set=global_process_set, *, host=as_array, wrap=None):
    """Concatenates every rank's tensor along the first dimension, which may differ per rank
    (in the order of the ranks in the set)."""
    return _h.synchronize(allgather_async(tensor, name, process_set, host=host, wrap=wrap))


def broadcast_async(
    tensor,
    root_rank,
    name=None,
    out=None,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    name = _naming.op_name(BROADCAST, name, process_set)
    return _h.submit(
        BROADCAST,
        name,
        [tensor],
        [out],
        Sum,
        root_rank,
        process_set=process_set,
        host=host,
        wrap=wrap,
    )


def broadcast(
    tensor,
    root_rank,
    name=None,
    out=None,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    """Returns root_rank's tensor on every rank. root_rank is a global rank (hvd.rank()), also
    with a process set, as upstream."""
    return _h.synchronize(
        broadcast_async(tensor, root_rank, name, out, process_set, host=host, wrap=wrap)
    )


def _shape_of(tensor, host):
    """The input's shape, or None where it cannot be read (submit then refuses the input)."""
    try:
        if _device.is_device_array(tensor):
            return tuple(_device.describe("", tensor).shape)
        return host(tensor).shape
    except (TypeError, ValueError):
        return None


def alltoall_async(
    tensor, splits=None, name=None, process_set=global_process_set, *, host=as_array, wrap=None
):
    # Bad splits, or a scalar, are not raised here: the op is submitted with the reason, which
    # the engine negotiates, so every rank fails with it instead of waiting for this one.
    name = _naming.op_name(ALLTOALL, name, process_set)
    why = ""
    values = []
    n = _set_size(process_set) if splits is None else 0  # a set that does not exist: raised here
    try:
        if splits is not None:
            values = _args.split_values(splits)
        else:
            shape = _shape_of(tensor, host)
            if shape is not None:  # else submit refuses the input itself
                values = _args.even_splits(shape, n)
    except (TypeError, ValueError) as e:
        why = str(e)
    return _h.submit(
        ALLTOALL,
        name,
        [tensor],
        splits=values,
        invalid=why,
        process_set=process_set,
        host=host,
        wrap=wrap,
    )


def alltoall(
    tensor, splits=None, name=None, process_set=global_process_set, *, host=as_array, wrap=None
):
    """Sends splits[r] rows of `tensor` to rank r; returns the rows received, ordered by
    sender, and how many came from each rank (also without `splits`, unlike
    horovod.tensorflow's: one return shape for both forms). Without `splits` the first
    dimension is split evenly; one the number of ranks does not divide is a ValueError on every
    rank."""
    return _h.synchronize(alltoall_async(tensor, splits, name, process_set, host=host, wrap=wrap))


def reducescatter_async(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    name = _naming.op_name(REDUCESCATTER, name, process_set)
    return _h.submit(
        REDUCESCATTER,
        name,
        [tensor],
        None,
        op,
        0,
        prescale_factor,
        postscale_factor,
        process_set=process_set,
        host=host,
        wrap=wrap,
    )


def reducescatter(
    tensor,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    """Reduces across ranks and returns this rank's block of rows (the first ranks get one
    extra row when the first dimension does not divide evenly)."""
    return _h.synchronize(
        reducescatter_async(
            tensor,
            op,
            name,
            prescale_factor,
            postscale_factor,
            process_set,
            host=host,
            wrap=wrap,
        )
    )


def _object_set_id(process_set):
    """The set id an object collective's unnamed ops are counted under; 0 for what is not a
    process set at all, which the collective's own ops then refuse on every rank
    (handles.submit)."""
    return 0 if _h._not_a_set(process_set) else _h._process_set_id(process_set)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` (anything picklable) on every rank (objects.py)."""
    from horovod.common import objects  # noqa: PLC0415  (pickle machinery only when used)

    pid = _object_set_id(process_set)
    is_root = _basics.rank() == root_rank
    return objects.broadcast_object(
        obj,
        is_root,
        lambda data, op_name: broadcast(data, root_rank, op_name, process_set=process_set),
        name,
        pid,
        root_rank,
    )


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj`, as a list indexed by rank in the set (objects.py)."""
    from horovod.common import objects  # noqa: PLC0415

    pid = _object_set_id(process_set)
    return objects.allgather_object(
        obj, lambda data, op_name: allgather(data, op_name, process_set=process_set), name, pid
    )


def grouped_allgather_async(
    tensors, name=None, process_set=global_process_set, *, host=as_array, wrap=None
):
    """Allgathers of several tensors as one op (one negotiation); synchronize gives a list."""
    name = _naming.op_name(ALLGATHER, name, process_set)
    tensors = list(tensors)
    return _h.submit(
        ALLGATHER, name, tensors, grouped=True, process_set=process_set, host=host, wrap=wrap
    )


def grouped_reducescatter_async(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    *,
    host=as_array,
    wrap=None,
):
    """Reducescatters of several tensors as one op; synchronize gives a list."""
    name = _naming.op_name(REDUCESCATTER, name, process_set)
    tensors = list(tensors)
    return _h.submit(
        REDUCESCATTER,
        name,
        tensors,
        None,
        op,
        0,
        prescale_factor,
        postscale_factor,
        grouped=True,
        process_set=process_set,
        host=host,
        wrap=wrap,
    )
