"""The blocking collectives as torch custom ops (`torch.ops.horovod.*`), so that a model calling
`hvd.allreduce` & co. compiles with `torch.compile(fullgraph=True)`; and the gradients of the
collectives (the `*_grad` functions), which the ops register and mpi_ops' eager autograd uses.

Eager calls keep the autograd.Function + handle path of mpi_ops.py. Under torch.compile, Dynamo
cannot trace a handle through the engine, so mpi_ops hands the call to these ops: each is opaque
to the compiler (it runs the engine at run time, in program order), has a fake kernel that gives
its output's shape (a fresh unbacked size where the shape depends on the other ranks: allgather,
alltoall, reducescatter) and its gradient registered, so the backward compiles too. Arguments
are what a custom op can carry: the process set as its engine id, the op's name as a string
("" = unnamed, named by the engine's counters at run time, the same on every rank).
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from horovod.common import array_ops as _array_ops
from horovod.common import basics as _b
from horovod.common import handles as _h
from horovod.common import process_sets as _ps
from horovod.common.engine_types import Average, Sum
from horovod.torch.tensors import IO, _dt, like_splits


def _run(handle):
    return _h.synchronize(handle)


def _name(name):
    return name or None


def _copy_if_alias(out, tensor):
    """A custom op's output may not alias its input (a one-rank set returns its input)."""
    return out.clone() if out.data_ptr() == tensor.data_ptr() and out.numel() else out


# ---- allreduce ---------------------------------------------------------------------------


@torch.library.custom_op("horovod::allreduce", mutates_args=())
def _allreduce(
    tensor: Tensor, name: str, op: int, prescale: float, postscale: float, pid: int
) -> Tensor:
    h = _array_ops.allreduce_async(
        _dt(tensor.contiguous()), op, _name(name), prescale, postscale, None, _ps.by_id(pid), **IO
    )
    return _copy_if_alias(_run(h), tensor)


@_allreduce.register_fake
def _(tensor, name, op, prescale, postscale, pid):
    return torch.empty_like(tensor, memory_format=torch.contiguous_format)


def _allreduce_setup(ctx, inputs, output):
    _, _, ctx.op, ctx.prescale, ctx.postscale, ctx.pid = inputs


def allreduce_grad(grad, op, prescale, postscale, pid):
    """The same reduction of the incoming gradients (Adasum too, as upstream)."""
    return _allreduce(grad, "", int(op), float(prescale), float(postscale), pid)


def _allreduce_backward(ctx, grad):
    g = allreduce_grad(grad, ctx.op, ctx.prescale, ctx.postscale, ctx.pid)
    return g, None, None, None, None, None


_allreduce.register_autograd(_allreduce_backward, setup_context=_allreduce_setup)


@torch.library.custom_op("horovod::grouped_allreduce", mutates_args=())
def _grouped_allreduce(
    tensors: List[Tensor], name: str, op: int, prescale: float, postscale: float, pid: int
) -> List[Tensor]:
    h = _array_ops.grouped_allreduce_async(
        [_dt(t.contiguous()) for t in tensors],
        op,
        _name(name),
        prescale,
        postscale,
        _ps.by_id(pid),
        **IO,
    )
    return [_copy_if_alias(o, t) for o, t in zip(_run(h), tensors)]


@_grouped_allreduce.register_fake
def _(tensors, name, op, prescale, postscale, pid):
    return [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]


def _grouped_setup(ctx, inputs, output):
    tensors, _, ctx.op, ctx.prescale, ctx.postscale, ctx.pid = inputs
    ctx.shapes = [(t.shape, t.dtype, t.device) for t in tensors]


def grouped_allreduce_grad(grads, op, prescale, postscale, pid):
    return _grouped_allreduce(list(grads), "", int(op), float(prescale), float(postscale), pid)


def _grouped_backward(ctx, grads):
    grads = [
        g if g is not None else torch.zeros(s, dtype=d, device=v)
        for g, (s, d, v) in zip(grads, ctx.shapes)
    ]
    g = grouped_allreduce_grad(grads, ctx.op, ctx.prescale, ctx.postscale, ctx.pid)
    return g, *[None] * 5


_grouped_allreduce.register_autograd(_grouped_backward, setup_context=_grouped_setup)


# ---- allgather ---------------------------------------------------------------------------


@torch.library.custom_op("horovod::allgather", mutates_args=())
def _allgather(tensor: Tensor, name: str, pid: int) -> Tensor:
    h = _array_ops.allgather_async(_dt(tensor.contiguous()), _name(name), _ps.by_id(pid), **IO)
    return _copy_if_alias(_run(h), tensor)


@_allgather.register_fake
def _(tensor, name, pid):
    rows = torch.library.get_ctx().new_dynamic_size()  # the sum of every rank's rows
    return tensor.new_empty((rows, *tensor.shape[1:]))


@torch.library.custom_op("horovod::allgather_backward", mutates_args=())
def _allgather_backward_op(grad: Tensor, rows: int, pid: int) -> Tensor:
    # Every rank's loss depends on every rank's rows: average the gradients (as optimizers
    # average), then keep this rank's rows (where they start: the ranks before it).
    ps = _ps.by_id(pid)
    g = _run(
        _array_ops.allreduce_async(_dt(grad.contiguous()), Average, None, 1.0, 1.0, None, ps, **IO)
    )
    counts = _run(
        _array_ops.allgather_async(torch.tensor([rows], dtype=torch.int64), None, ps, **IO)
    )
    me = _ps.rank_and_size(pid)[0]
    start = int(counts[:me].sum())
    return g[start : start + rows].clone()


@_allgather_backward_op.register_fake
def _(grad, rows, pid):
    return grad.new_empty((rows, *grad.shape[1:]))


def _allgather_setup(ctx, inputs, output):
    tensor, _, ctx.pid = inputs
    ctx.rows = tensor.shape[0]


def allgather_grad(grad, rows, pid):
    """The gradient of this rank's `rows` input rows."""
    return _allgather_backward_op(grad, rows, pid)


def _allgather_backward(ctx, grad):
    return allgather_grad(grad, ctx.rows, ctx.pid), None, None


_allgather.register_autograd(_allgather_backward, setup_context=_allgather_setup)


# ---- broadcast ---------------------------------------------------------------------------


@torch.library.custom_op("horovod::broadcast", mutates_args=())
def _broadcast(tensor: Tensor, root_rank: int, name: str, pid: int) -> Tensor:
    h = _array_ops.broadcast_async(
        _dt(tensor.contiguous()), root_rank, _name(name), None, _ps.by_id(pid), **IO
    )
    return _copy_if_alias(_run(h), tensor)


@_broadcast.register_fake
def _(tensor, root_rank, name, pid):
    return torch.empty_like(tensor, memory_format=torch.contiguous_format)


def _broadcast_setup(ctx, inputs, output):
    _, ctx.root, _, ctx.pid = inputs


def broadcast_grad(grad, root_rank, pid):
    """Only the root's input reaches the outputs: it gets the averaged gradient, others zero."""
    g = _allreduce(grad, "", Average, 1.0, 1.0, pid)
    return g if _b.rank() == root_rank else g * 0


def _broadcast_backward(ctx, grad):
    return broadcast_grad(grad, ctx.root, ctx.pid), None, None, None


_broadcast.register_autograd(_broadcast_backward, setup_context=_broadcast_setup)


# ---- reducescatter -----------------------------------------------------------------------


@torch.library.custom_op("horovod::reducescatter", mutates_args=())
def _reducescatter(
    tensor: Tensor, name: str, op: int, prescale: float, postscale: float, pid: int
) -> Tensor:
    h = _array_ops.reducescatter_async(
        _dt(tensor.contiguous()), op, _name(name), prescale, postscale, _ps.by_id(pid), **IO
    )
    return _copy_if_alias(_run(h), tensor)


@_reducescatter.register_fake
def _(tensor, name, op, prescale, postscale, pid):
    rows = torch.library.get_ctx().new_dynamic_size()  # this rank's block
    return tensor.new_empty((rows, *tensor.shape[1:]))


@torch.library.custom_op("horovod::reducescatter_backward", mutates_args=())
def _reducescatter_backward_op(grad: Tensor, rows: int, scale: float, pid: int) -> Tensor:
    # Each input row reaches one rank's output through the reduction: gather the rows'
    # gradients, scaled by `scale` (reducescatter_grad).
    g = _run(_array_ops.allgather_async(_dt(grad.contiguous()), None, _ps.by_id(pid), **IO))
    return g * scale if scale != 1.0 else g.clone()


@_reducescatter_backward_op.register_fake
def _(grad, rows, scale, pid):
    return grad.new_empty((rows, *grad.shape[1:]))


def reducescatter_grad(grad, rows, op, prescale, postscale, pid):
    """The gradient of the `rows` input rows as upstream defines it: scaled by the scale factors
    and, for Sum, by the set's size (n times the derivative of the sum of the ranks' losses, for
    Sum and Average alike)."""
    scale = prescale * postscale * (_ps.rank_and_size(pid)[1] if op == Sum else 1)
    return _reducescatter_backward_op(grad, rows, float(scale), pid)


def _reducescatter_setup(ctx, inputs, output):
    tensor, _, ctx.op, ctx.prescale, ctx.postscale, ctx.pid = inputs
    ctx.rows = tensor.shape[0]


def _reducescatter_backward(ctx, grad):
    g = reducescatter_grad(grad, ctx.rows, ctx.op, ctx.prescale, ctx.postscale, ctx.pid)
    return g, None, None, None, None, None


_reducescatter.register_autograd(_reducescatter_backward, setup_context=_reducescatter_setup)


# ---- alltoall ----------------------------------------------------------------------------


@torch.library.custom_op("horovod::alltoall", mutates_args=())
def _alltoall(
    tensor: Tensor, splits: Optional[List[int]], name: str, pid: int
) -> Tuple[Tensor, Tensor]:
    h = _array_ops.alltoall_async(
        _dt(tensor.contiguous()), splits, _name(name), _ps.by_id(pid), **IO
    )
    out, received = _run(h)
    return _copy_if_alias(out, tensor), received.to(torch.int64)


@_alltoall.register_fake
def _(tensor, splits, name, pid):
    rows = torch.library.get_ctx().new_dynamic_size()
    size = _ps.rank_and_size(pid)[1]
    return tensor.new_empty((rows, *tensor.shape[1:])), tensor.new_empty(size, dtype=torch.int64)


@torch.library.custom_op("horovod::alltoall_backward", mutates_args=())
def _alltoall_backward_op(
    grad: Tensor, received: Tensor, rows: int, pid: int
) -> Tuple[Tensor, Tensor]:
    # The rows go back where they came from. What this alltoall receives from each rank (the
    # forward's splits) comes out too: its own gradient sends the rows back with them.
    h = _array_ops.alltoall_async(
        _dt(grad.contiguous()), received.tolist(), None, _ps.by_id(pid), **IO
    )
    out, counts = _run(h)
    return _copy_if_alias(out, grad), counts.to(torch.int64)


@_alltoall_backward_op.register_fake
def _(grad, received, rows, pid):
    size = _ps.rank_and_size(pid)[1]
    return grad.new_empty((rows, *grad.shape[1:])), grad.new_empty(size, dtype=torch.int64)


def _alltoall_setup(ctx, inputs, output):
    tensor, _, _, ctx.pid = inputs
    ctx.rows = tensor.shape[0]
    ctx.save_for_backward(output[1])
    ctx.mark_non_differentiable(output[1])


def alltoall_grad(grad, received, rows, pid):
    """The rows go back where they came from (`received`: the forward's per-rank counts)."""
    return _alltoall_backward_op(grad, received, rows, pid)[0]


def _alltoall_backward(ctx, grad, _received_grad):
    (received,) = ctx.saved_tensors
    return alltoall_grad(grad, received, ctx.rows, ctx.pid), None, None, None


_alltoall.register_autograd(_alltoall_backward, setup_context=_alltoall_setup)


# ---- the backward ops' own gradients (second derivatives) --------------------------------
# Each backward op is a linear map of every rank's incoming gradients, so its gradient is its
# adjoint, another collective; allgather_backward and reducescatter_backward are each other's
# adjoints up to a factor, alltoall_backward is a permutation: every order is differentiable.


def _allgather_backward_setup(ctx, inputs, output):
    grad, _, ctx.pid = inputs
    ctx.total = grad.shape[0]


def _allgather_backward_backward(ctx, grad):
    # Rank r's output is 1/n of its rows of the ranks' sum: each rank's input gets every
    # rank's rows, concatenated, times 1/n.
    n = _ps.rank_and_size(ctx.pid)[1]
    return _reducescatter_backward_op(grad, ctx.total, 1.0 / n, ctx.pid), None, None


_allgather_backward_op.register_autograd(
    _allgather_backward_backward, setup_context=_allgather_backward_setup
)


def _reducescatter_backward_setup(ctx, inputs, output):
    grad, _, ctx.scale, ctx.pid = inputs
    ctx.rows = grad.shape[0]


def _reducescatter_backward_backward(ctx, grad):
    # Every rank's output is `scale` times the ranks' inputs concatenated: each rank's input
    # gets its own block of the ranks' sum, times `scale` (allgather_backward averages: times n).
    n = _ps.rank_and_size(ctx.pid)[1]
    g = _allgather_backward_op(grad, ctx.rows, ctx.pid)
    return g * (ctx.scale * n), None, None, None


_reducescatter_backward_op.register_autograd(
    _reducescatter_backward_backward, setup_context=_reducescatter_backward_setup
)


def _alltoall_backward_setup(ctx, inputs, output):
    grad, _, _, ctx.pid = inputs
    ctx.rows = grad.shape[0]
    ctx.save_for_backward(output[1])
    ctx.mark_non_differentiable(output[1])


def _alltoall_backward_backward(ctx, grad, _counts_grad):
    # A permutation's adjoint is its inverse: the rows go back with the counts that came in.
    (counts,) = ctx.saved_tensors
    return _alltoall_backward_op(grad, counts, ctx.rows, ctx.pid)[0], None, None, None


_alltoall_backward_op.register_autograd(
    _alltoall_backward_backward, setup_context=_alltoall_backward_setup
)


# ---- what mpi_ops calls while torch.compile traces -----------------------------------------


def allreduce(tensor, name, op, prescale, postscale, process_set):
    pid = _ps.process_set_id(process_set)
    return _allreduce(tensor, name or "", int(op), float(prescale), float(postscale), pid)


def grouped_allreduce(tensors, name, op, prescale, postscale, process_set):
    pid = _ps.process_set_id(process_set)
    return _grouped_allreduce(
        list(tensors), name or "", int(op), float(prescale), float(postscale), pid
    )


def allgather(tensor, name, process_set):
    return _allgather(tensor, name or "", _ps.process_set_id(process_set))


def broadcast(tensor, root_rank, name, process_set):
    return _broadcast(tensor, int(root_rank), name or "", _ps.process_set_id(process_set))


def reducescatter(tensor, name, op, prescale, postscale, process_set):
    pid = _ps.process_set_id(process_set)
    return _reducescatter(tensor, name or "", int(op), float(prescale), float(postscale), pid)


def alltoall(tensor, splits, name, process_set):
    like = splits if isinstance(splits, Tensor) else None
    if like is not None:
        splits = splits.tolist()  # a graph break: give a list to compile without one
    pid = _ps.process_set_id(process_set)
    out, received = _alltoall(tensor, None if splits is None else list(splits), name or "", pid)
    return out, (received if like is None else like_splits(received, like))
