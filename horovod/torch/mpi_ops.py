"""horovod.torch's collectives: torch tensors through the shared submission layer
(horovod/common/array_ops.py), with upstream's signatures, in-place forms and autograd.

A CPU tensor reaches the engine as a NumPy view of its own memory (no copy; `_` forms reduce
into the tensor itself when it is contiguous); a CUDA tensor as itself (horovod/common/device.py
reads its pointer and torch's current stream). Results are torch tensors. The blocking forms
are differentiable (autograd.Function, the gradients upstream defines); `_async` forms are not,
as upstream."""

import math

import numpy as np
import torch

from horovod.common import array_ops as _array_ops
from horovod.common import basics as _b
from horovod.common import handles as _h
from horovod.common import process_sets as _ps
from horovod.common.engine_types import Average, Sum
from horovod.common.process_sets import global_process_set
from horovod.torch import compiled as _compiled
from horovod.torch.compression import Compression
from horovod.torch.tensors import IO as _IO
from horovod.torch.tensors import _dt, _wrap, like_splits
from horovod.torch.tensors import eager_only as _eager_only
from horovod.torch.tensors import plain_view as _plain_view

# In-place handles: id(handle) -> (handle, the tensor synchronize returns, copy the result into
# it?). A contiguous tensor is the op's output itself; another gets the result copied in.
_in_place = {}
# Alltoall handles given their splits as a tensor: id(handle) -> (handle, that tensor). The
# received splits come back like it (its device and dtype), as upstream's do: on the GPU for
# splits on the GPU.
_splits_like = {}


def _op(op, average):
    """upstream's `average` (deprecated) and `op`: one of them, Average by default."""
    if op is not None and average is not None:
        raise ValueError("the op parameter supersedes average; give only one of them")
    if op is None:
        return Average if average is None or average else Sum
    return op


def _into(tensor):
    """The `out` of an in-place op on `tensor`: itself where the engine can write into it
    (contiguous, and no lazy negation or conjugation, whose memory holds other values: the
    result is copied into those, through torch)."""
    if (
        isinstance(tensor, torch.Tensor)
        and tensor.is_contiguous()
        and not tensor.is_neg()
        and not tensor.is_conj()
    ):
        return tensor.detach()
    return None


def _dts(tensors):
    return [_dt(t) for t in tensors]


def _rows(tensor):
    """The first dimension an allgather or reducescatter splits (a scalar counts as one row).
    Not a tensor: 0, and the submission refuses it on every rank, named (raised here, before
    the submission, it left the other ranks waiting)."""
    if not isinstance(tensor, torch.Tensor):
        return 0
    return tensor.shape[0] if tensor.dim() else 1


def _track(handle, tensor, out):
    _in_place[id(handle)] = (handle, tensor, out is None)
    return handle


@_eager_only
def poll(handle):
    """True once the op has finished."""
    if isinstance(handle, _SparseHandle):
        return all(_h.poll(h) for h in handle.parts)
    return _h.poll(handle)


@_eager_only
def synchronize(handle):
    """Waits for an `_async` op and returns its output (the tensor itself for `_` forms)."""
    if isinstance(handle, _SparseHandle):
        return handle.result()
    entry = _in_place.pop(id(handle), None)
    try:
        result = _h.synchronize(handle)
    except BaseException:
        if entry is not None and entry[0] is handle and handle._id is not None:
            _in_place[id(handle)] = entry  # a timeout or Ctrl-C: it can be waited on again
        raise
    like = _splits_like.pop(id(handle), None)
    if like is not None and like[0] is handle:
        out, received = result
        return out, like_splits(received, like[1])
    if entry is None or entry[0] is not handle:
        return result
    _, tensor, copy = entry
    with torch.no_grad():  # a parameter (a leaf that requires grad) may be the target
        if isinstance(tensor, list):
            if copy:
                for t, r in zip(tensor, result):
                    t.copy_(r)
            return tensor
        if copy:
            tensor.copy_(result)
    return tensor


# ---- allreduce ---------------------------------------------------------------------------


@_eager_only
def allreduce_async(
    tensor,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    op = _op(op, average)
    return _array_ops.allreduce_async(
        _dt(tensor), op, name, prescale_factor, postscale_factor, None, process_set, **_IO
    )


@_eager_only
def allreduce_async_(
    tensor,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    op, out = _op(op, average), _into(tensor)
    view = _plain_view(tensor) if out is not None else None
    # A plain view is its own output (the tensor's memory) and needs no conversion on the way in.
    src, dst, io = (view, view, {"wrap": _wrap}) if view is not None else (_dt(tensor), out, _IO)
    h = _array_ops.allreduce_async(
        src, op, name, prescale_factor, postscale_factor, dst, process_set, **io
    )
    return _track(h, tensor, out)


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(
            _array_ops.allreduce_async(
                _dt(tensor), op, name, prescale, postscale, None, process_set, **_IO
            )
        )

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale, process_set = ctx.args
        g = _compiled.allreduce_grad(grad, op, prescale, postscale, _ps.process_set_id(process_set))
        return g, None, None, None, None, None


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces `tensor` across ranks (Average by default), differentiably; `compression`
    casts it for the wire (Compression.fp16 / bf16) and back."""
    op = _op(op, average)
    sent, ctx = compression.compress(tensor)
    if torch.compiler.is_compiling():  # a custom op the compiler can keep in its graph
        out = _compiled.allreduce(sent, name, op, prescale_factor, postscale_factor, process_set)
    else:
        out = _Allreduce.apply(sent, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(out, ctx)


@_eager_only
def allreduce_(
    tensor,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces `tensor` in place and returns it."""
    return synchronize(
        allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set)
    )


@_eager_only
def grouped_allreduce_async(
    tensors,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    op = _op(op, average)
    return _array_ops.grouped_allreduce_async(
        _dts(list(tensors)), op, name, prescale_factor, postscale_factor, process_set, **_IO
    )


@_eager_only
def grouped_allreduce_async_(
    tensors,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    # The group's outputs are the engine's; each is copied into its tensor at synchronize.
    tensors = list(tensors)
    h = grouped_allreduce_async(
        tensors, average, name, op, prescale_factor, postscale_factor, process_set
    )
    return _track(h, tensors, None)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(
            synchronize(
                _array_ops.grouped_allreduce_async(
                    _dts(list(tensors)), op, name, prescale, postscale, process_set, **_IO
                )
            )
        )

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale, process_set = ctx.args
        pid = _ps.process_set_id(process_set)
        out = _compiled.grouped_allreduce_grad(grads, op, prescale, postscale, pid)
        return (None, None, None, None, None, *out)


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces a list of tensors as one op (one negotiation, fused), differentiably."""
    op = _op(op, average)
    sent = [compression.compress(t) for t in tensors]
    if torch.compiler.is_compiling():
        outs = _compiled.grouped_allreduce(
            [s for s, _ in sent], name, op, prescale_factor, postscale_factor, process_set
        )
    else:
        outs = _GroupedAllreduce.apply(
            name, op, prescale_factor, postscale_factor, process_set, *[s for s, _ in sent]
        )
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, sent)]


@_eager_only
def grouped_allreduce_(
    tensors,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    return synchronize(
        grouped_allreduce_async_(
            tensors, average, name, op, prescale_factor, postscale_factor, process_set
        )
    )


@_eager_only
def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse COO tensor reduced as upstream does: its values and indices gathered from every
    rank, summed (divided by the set's size for Average) by coalescing. Returns a handle
    whose synchronize() gives the reduced sparse tensor.

    Each nonzero travels as one row of bytes, its indices then its values, in one allgather
    named `name`: a rank whose gradient is dense where another's is sparse submits an
    allreduce of that name, and the engine fails both on every rank, naming the ranks of each
    op (under other names, the two ranks waited for each other's ops for ever)."""
    t = tensor.coalesce()
    indices = _byte_rows(t.indices().t().contiguous())
    rows = torch.cat([indices, _byte_rows(t.values().contiguous())], dim=1)
    h = _array_ops.allgather_async(rows, name, process_set, **_IO)
    return _SparseHandle(h, t, indices.shape[1], op, process_set)


def _byte_rows(t):
    """A contiguous tensor's bytes, one row per index of its first dimension; the rows' width
    from the other dimensions, so that a rank with no nonzeros sends rows as wide as the
    others' (the allgather needs equal widths)."""
    width = math.prod(t.shape[1:]) * t.element_size()
    return t.reshape(-1).view(torch.uint8).reshape(t.shape[0], width)


class _SparseHandle:
    def __init__(self, handle, like, index_bytes, op, process_set):
        self.parts = (handle,)
        self.like, self.index_bytes, self.op, self.process_set = like, index_bytes, op, process_set

    def result(self):
        rows = _wrap(_h.synchronize(self.parts[0]))
        like = self.like
        indices = rows[:, : self.index_bytes].contiguous().view(like.indices().dtype)
        values = rows[:, self.index_bytes :].contiguous().view(like.values().dtype)
        values = values.reshape(rows.shape[0], *like.values().shape[1:])
        if self.op == Average:
            values = values / _ps.set_size(self.process_set)
        return torch.sparse_coo_tensor(indices.t(), values, like.shape).coalesce()

    # Upstream's handle is a function returning the result (`handle()`); synchronize() works too.
    __call__ = result


# ---- allgather, broadcast, alltoall, reducescatter ---------------------------------------


@_eager_only
def allgather_async(tensor, name=None, process_set=global_process_set):
    return _array_ops.allgather_async(_dt(tensor), name, process_set, **_IO)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows, ctx.process_set = _rows(tensor), process_set
        return synchronize(_array_ops.allgather_async(_dt(tensor), name, process_set, **_IO))

    @staticmethod
    def backward(ctx, grad):
        g = _compiled.allgather_grad(grad, ctx.rows, _ps.process_set_id(ctx.process_set))
        return g, None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension (which may differ per rank),
    differentiably."""
    if torch.compiler.is_compiling():
        return _compiled.allgather(tensor, name, process_set)
    return _Allgather.apply(tensor, name, process_set)


@_eager_only
def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _array_ops.grouped_allgather_async(_dts(tensors), name, process_set, **_IO)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [_rows(t) for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        pid = _ps.process_set_id(ctx.process_set)
        out = [_compiled.allgather_grad(g, rows, pid) for g, rows in zip(grads, ctx.rows)]
        return (None, None, *out)


@_eager_only
def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers of several tensors as one op, differentiably (each tensor's gradient as
    allgather's)."""
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


@_eager_only
def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return _array_ops.broadcast_async(_dt(tensor), root_rank, name, None, process_set, **_IO)


@_eager_only
def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    out = _into(tensor)
    h = _array_ops.broadcast_async(_dt(tensor), root_rank, name, out, process_set, **_IO)
    return _track(h, tensor, out)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root, ctx.process_set = root_rank, process_set
        return synchronize(
            _array_ops.broadcast_async(_dt(tensor), root_rank, name, None, process_set, **_IO)
        )

    @staticmethod
    def backward(ctx, grad):
        pid = _ps.process_set_id(ctx.process_set)
        return _compiled.broadcast_grad(grad, ctx.root, pid), None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor on every rank (root_rank: a global rank), differentiably."""
    if torch.compiler.is_compiling():
        return _compiled.broadcast(tensor, root_rank, name, process_set)
    return _Broadcast.apply(tensor, root_rank, name, process_set)


@_eager_only
def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


@_eager_only
def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    like = splits if isinstance(splits, torch.Tensor) else None
    if like is not None:
        splits = splits.tolist()
    handle = _array_ops.alltoall_async(_dt(tensor), splits, name, process_set, **_IO)
    if like is not None:
        _splits_like[id(handle)] = (handle, like)
    return handle


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.process_set, ctx.rows = received, process_set, tensor.shape[0]
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _received_grad):
        pid = _ps.process_set_id(ctx.process_set)
        return _compiled.alltoall_grad(grad, ctx.received, ctx.rows, pid), None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows to rank r (evenly without splits) and returns the rows received;
    with `splits`, also how many came from each rank, as upstream's torch frontend does."""
    if torch.compiler.is_compiling():
        out, received = _compiled.alltoall(tensor, splits, name, process_set)
    else:
        out, received = _Alltoall.apply(tensor, splits, name, process_set)
    return out if splits is None else (out, received)


@_eager_only
def reducescatter_async(
    tensor,
    name=None,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    return _array_ops.reducescatter_async(
        _dt(tensor), op, name, prescale_factor, postscale_factor, process_set, **_IO
    )


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale, postscale):
        out = synchronize(
            _array_ops.reducescatter_async(
                _dt(tensor), op, name, prescale, postscale, process_set, **_IO
            )
        )
        # After the op: a tensor it refuses (a scalar) gets the engine's error, not ours.
        ctx.args, ctx.rows = (op, process_set, prescale, postscale), tensor.shape[0]
        return out

    @staticmethod
    def backward(ctx, grad):
        op, process_set, prescale, postscale = ctx.args
        pid = _ps.process_set_id(process_set)
        g = _compiled.reducescatter_grad(grad, ctx.rows, op, prescale, postscale, pid)
        return g, None, None, None, None, None


def reducescatter(
    tensor,
    name=None,
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduces across ranks and returns this rank's block of rows, differentiably."""
    sent, ctx = compression.compress(tensor)
    if torch.compiler.is_compiling():
        out = _compiled.reducescatter(
            sent, name, op, prescale_factor, postscale_factor, process_set
        )
    else:
        out = _Reducescatter.apply(sent, name, op, process_set, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


@_eager_only
def grouped_reducescatter_async(
    tensors,
    name=None,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    return _array_ops.grouped_reducescatter_async(
        _dts(tensors), op, name, prescale_factor, postscale_factor, process_set, **_IO
    )


@_eager_only
def grouped_reducescatter(
    tensors,
    name=None,
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reducescatters of several tensors as one op, differentiably (each tensor's gradient as
    reducescatter's)."""
    sent = [compression.compress(t) for t in tensors]
    outs = _GroupedReducescatter.apply(
        name, op, process_set, prescale_factor, postscale_factor, *[s for s, _ in sent]
    )
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, sent)]


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale, postscale, *tensors):
        ctx.args = (op, process_set, prescale, postscale)
        ctx.rows = [_rows(t) for t in tensors]
        return tuple(
            synchronize(
                grouped_reducescatter_async(
                    list(tensors), name, op, process_set, prescale, postscale
                )
            )
        )

    @staticmethod
    def backward(ctx, *grads):
        op, process_set, prescale, postscale = ctx.args
        pid = _ps.process_set_id(process_set)
        out = [
            _compiled.reducescatter_grad(g, rows, op, prescale, postscale, pid)
            for g, rows in zip(grads, ctx.rows)
        ]
        return (None, None, None, None, None, *out)


@_eager_only
def join(device=-1):
    """This rank is out of data (see horovod.common.basics.join); returns the last rank to join."""
    return _b.join(device)


@_eager_only
def barrier(process_set=global_process_set):
    """Returns once every rank (of the set) has called it."""
    _array_ops.allreduce(np.zeros(1, np.int32), Sum, "horovod.barrier", process_set=process_set)
