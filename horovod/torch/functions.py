"""Broadcasts of a model's parameters, an optimizer's state and Python objects, so that every
rank starts from root_rank's."""

import torch

from horovod.common import array_ops as _array_ops
from horovod.common.exceptions import HorovodInvalidArgumentError
from horovod.common.process_sets import global_process_set
from horovod.torch import mpi_ops
from horovod.torch.tensors import eager_only


@eager_only
def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites each tensor of `params` (model.state_dict(), model.named_parameters() or
    model.parameters(): a dict, or a list of tensors or (name, tensor)) with root_rank's, in
    place. All broadcasts are in flight at once; every rank must pass the same structure."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type: {type(params)}")
    keyed = [
        (f"broadcast.param.{name if name is not None else i}", p)
        for i, (name, p) in enumerate(items)
        if p is not None
    ]
    _check_same_keys([k for k, _ in keyed], root_rank, process_set)
    handles = [mpi_ops.broadcast_async_(p.data, root_rank, k, process_set) for k, p in keyed]
    for h in handles:
        mpi_ops.synchronize(h)


def _check_same_keys(keys, root_rank, process_set):
    """Raises on every rank if the ranks' parameters differ from root_rank's, naming each rank's
    missing and extra keys: a key that some ranks lack would leave the others waiting for its
    broadcast for ever. One allgather of the key lists (once per call, not per tensor)."""
    everyone = dict(
        _array_ops.allgather_object(
            (mpi_ops._b.rank(), keys), name="broadcast_parameters.keys", process_set=process_set
        )
    )
    want = everyone.get(root_rank)
    if want is None or all(k == want for k in everyone.values()):
        return  # root outside the set: the broadcasts refuse it, on every rank
    problems, set_want = [], set(want)
    for rank, have in sorted(everyone.items()):
        set_have = set(have)
        missing = [k for k in want if k not in set_have]
        extra = [k for k in have if k not in set_want]
        parts = ([f"lacks {missing}"] if missing else []) + ([f"has {extra} more"] if extra else [])
        if not parts and have != want:
            parts = ["has them in another order"]
        if parts:
            problems.append(f"rank {rank} " + " and ".join(parts))
    raise HorovodInvalidArgumentError(
        f"broadcast_parameters: the ranks' parameters differ from root rank {root_rank}'s: "
        + "; ".join(problems)
        + " (every rank must pass the same names)"
    )


@eager_only
def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (tensors and Python values alike, per-parameter state
    and param_groups' options such as the learning rate) root_rank's: its state_dict, sent as
    one object and loaded. Works for every torch.optim optimizer (L-BFGS included). Before the
    first step (no state yet), trainable parameters without a gradient get zeros, as upstream's
    version leaves them (it makes the state by a step on zero gradients; this one needs none):
    sparse zeros for SparseAdam and, as upstream, for an SGD's parameters of `model`'s sparse
    nn.Embedding modules (`model`, optional, is what identifies them)."""
    state = optimizer.state_dict()
    if not state["state"]:
        sparse = set()
        if model is not None:
            for m in model.modules():
                if isinstance(m, torch.nn.Embedding) and m.sparse:
                    sparse.update(id(p) for p in m.parameters())
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.requires_grad and p.grad is None:
                        p.grad = torch.zeros_like(p)
                        if isinstance(optimizer, torch.optim.SparseAdam) or (
                            isinstance(optimizer, torch.optim.SGD) and id(p) in sparse
                        ):
                            p.grad = p.grad.to_sparse()
    root_state = broadcast_object(
        state if mpi_ops._b.rank() == root_rank else None,
        root_rank,
        name="broadcast_optimizer_state",
        process_set=process_set,
    )
    if mpi_ops._b.rank() != root_rank:
        optimizer.load_state_dict(_to_devices(root_state, state))


def _to_devices(root_state, own_state):
    """Root's state with each tensor on the device of this rank's parameter (ranks pin their
    own GPUs); load_state_dict casts dtypes itself."""
    if not torch.cuda.is_available():
        return root_state
    device = torch.device("cuda", torch.cuda.current_device())
    for param_state in root_state["state"].values():
        for k, v in param_state.items():
            if isinstance(v, torch.Tensor) and v.is_cuda:
                param_state[k] = v.to(device)
    return root_state


@eager_only
def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (anything picklable, tensors included) on every rank."""
    return _array_ops.broadcast_object(obj, root_rank, name, process_set)


@eager_only
def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj`, as a list indexed by rank in the set."""
    return _array_ops.allgather_object(obj, name, process_set)
