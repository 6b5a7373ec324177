"""DistributedOptimizer: wraps any torch.optim optimizer so that each gradient is allreduced as
soon as backward() has accumulated it (a hook per parameter), overlapping communication with the
rest of the backward pass; step() waits for them, then steps. As upstream: named after
`named_parameters`, `backward_passes_per_step` for local accumulation, `synchronize()` /
`skip_synchronize()` for gradient clipping, and an error for zero_grad() between backward()
and step()."""

import contextlib
import warnings

import torch

from horovod.common import gradients as _gradients
from horovod.common import process_sets as _ps
from horovod.common.engine_types import Adasum, Average
from horovod.common.process_sets import global_process_set
from horovod.torch import mpi_ops
from horovod.torch.compression import Compression


def _gradient_names(named_parameters, all_params):
    """{id(parameter): the name its gradient (or delta) is reduced under}, checked as upstream:
    tuples, unique names, every parameter named; unnamed: by position."""
    if named_parameters is None:
        return {id(p): f"grad.noname.{i}" for i, p in enumerate(all_params)}
    named_parameters = list(named_parameters)
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError(
            "named_parameters should be a sequence of tuples (name, parameter), usually "
            "produced by model.named_parameters()"
        )
    names = [k for k, _ in named_parameters]
    dups = sorted({k for k in names if names.count(k) > 1})
    if dups:
        raise ValueError(
            "Parameter names in named_parameters must be unique. Found duplicates: "
            + ", ".join(dups)
        )
    named_ids = {id(v) for _, v in named_parameters}
    unnamed = [id(p) for p in all_params if id(p) not in named_ids]
    if unnamed:
        raise ValueError(
            "named_parameters was specified, but one or more model parameters were not "
            "named. Python object ids: " + ", ".join(map(str, unnamed))
        )
    return {id(v): f"grad.{k}" for k, v in named_parameters}


def _in_set(process_set):
    """Whether this rank is a member of `process_set`."""
    return _ps.rank_and_size(_ps.process_set_id(process_set))[0] >= 0


def _group_name(member_names):
    """A grouped reduction's name, from its first and last members' (unique per optimizer's
    parameters, as the single gradients' names are)."""
    first, last = member_names[0], member_names[-1]
    return f"{first}.group" if len(member_names) == 1 else f"{first}..{last}.group"


def _pass_counted(delay, key):
    """Counts a backward pass of parameter `key` down in `delay`; True when its gradient is due
    for reduction (every backward_passes_per_step passes). Upstream's error for a pass too many."""
    if delay[key] <= 0:
        raise AssertionError(
            "Gradients were computed more than backward_passes_per_step times before call "
            "to step(). Increase backward_passes_per_step to accumulate gradients locally."
        )
    delay[key] -= 1
    return delay[key] == 0


class _GradientReduction:
    """One optimizer's gradient reductions in a step: a gradient is submitted once it is due
    (alone, or with its group once the whole group is), then step() waits for them all and
    writes the results into the gradients. Apart from the optimizer class, whose own dict
    DistributedOptimizer copies into a subclass of the user's optimizer class."""

    def __init__(
        self, names, trained, groups, compression, sparse_as_dense, scaled_op, process_set
    ):
        self.names = names  # {id(parameter): the name its gradient is reduced under}
        self.compression = compression
        self.sparse_as_dense = sparse_as_dense
        self.densified = set()  # ids of parameters whose sparse gradient was sent dense
        self.op, self.prescale, self.postscale = scaled_op
        self.process_set = process_set
        self.groups = (
            [[trained[i] for i in idx] for idx in _gradients.groups_of(trained, groups)]
            if groups
            else []
        )
        self.group_of = {id(p): gi for gi, g in enumerate(self.groups) for p in g}
        # Named after their members, as single gradients are, so that two optimizers' groups
        # (an encoder's and a decoder's, in one backward) do not share a name.
        self.group_names = [_group_name([names[id(p)] for p in g]) for g in self.groups]
        self.ready = [set() for _ in self.groups]  # per group: ids of its due members
        self.handles = {}  # id(param) or ("group", gi) -> (handle, params, compression ctxs)

    def grad_of(self, p):
        if p.grad is None:  # a parameter this rank's backward did not reach: zeros, so every
            p.grad = torch.zeros_like(p)  # rank submits the same ops
        if p.grad.is_sparse and self.sparse_as_dense:
            p.grad = p.grad.to_dense()
            self.densified.add(id(p))  # made sparse again once reduced, as upstream
        return p.grad

    def submit_one(self, p):
        grad = self.grad_of(p)
        name = self.names[id(p)]
        if grad.is_sparse:
            h = mpi_ops.sparse_allreduce_async(grad, name, self.op, self.process_set)
            self.handles[id(p)] = (h, [p], [None])
            return
        sent, ctx = self.compression.compress(grad)
        h = mpi_ops.allreduce_async_(
            sent,
            name=name,
            op=self.op,
            prescale_factor=self.prescale,
            postscale_factor=self.postscale,
            process_set=self.process_set,
        )
        self.handles[id(p)] = (h, [p], [(sent, ctx)])

    def submit_group(self, gi):
        params = self.groups[gi]
        sent = [self.compression.compress(self.grad_of(p)) for p in params]
        h = mpi_ops.grouped_allreduce_async_(
            [s for s, _ in sent],
            name=self.group_names[gi],
            op=self.op,
            prescale_factor=self.prescale,
            postscale_factor=self.postscale,
            process_set=self.process_set,
        )
        self.handles[("group", gi)] = (h, params, sent)
        self.ready[gi].clear()

    def due(self, p):
        """`p`'s gradient is due: submitted alone, or its group once every member is due."""
        key = id(p)
        gi = self.group_of.get(key)
        if gi is None:
            self.submit_one(p)
            return
        self.ready[gi].add(key)
        if len(self.ready[gi]) == len(self.groups[gi]):
            self.submit_group(gi)

    def submit_the_rest(self, trained):
        """Submits what backward did not: every rank submits the same ops."""
        for p in trained:
            gi = self.group_of.get(id(p))
            if gi is None and id(p) not in self.handles:
                self.submit_one(p)
        for gi in range(len(self.groups)):
            if ("group", gi) not in self.handles:
                self.submit_group(gi)

    def wait_and_write(self):
        """Waits for every submitted reduction and writes its results into the gradients."""
        for h, params, sent in self.handles.values():
            out = mpi_ops.synchronize(h)
            outs = out if isinstance(out, list) else [out]
            for p, o, s in zip(params, outs, sent):
                if s is None:  # sparse: the reduced sparse tensor
                    p.grad = o
                    continue
                g = self.compression.decompress(o, s[1])
                if g is not p.grad:
                    p.grad.copy_(g)
                if id(p) in self.densified:  # the optimizer (SparseAdam) expects it sparse
                    p.grad = p.grad.to_sparse()
        self.densified.clear()


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        named_parameters,
        compression,
        backward_passes_per_step,
        op,
        gradient_predivide_factor,
        groups,
        sparse_as_dense,
        process_set,
    ):
        super(self.__class__, self).__init__(params)
        size = _ps.set_size(process_set)
        scaled_op = _gradients.scale_factors(op, gradient_predivide_factor, size)
        # Only a set's members reduce (as upstream): a rank outside it steps on its own
        # gradients, so every rank can wrap its optimizer alike.
        self._reduces = size > 1 and _in_set(process_set)
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._names = _gradient_names(named_parameters, all_params)
        trained = [p for p in all_params if p.requires_grad]
        self._reduction = _GradientReduction(
            self._names, trained, groups, compression, sparse_as_dense, scaled_op, process_set
        )
        # The reduction's own containers, which _reset_step (shared with the Adasum optimizer)
        # clears and upstream's tests read (_handles).
        self._handles = self._reduction.handles
        self._ready = self._reduction.ready
        self.backward_passes_per_step = backward_passes_per_step
        self._delay = {id(p): backward_passes_per_step for p in trained}
        self._trained = trained
        self._synchronized = False
        self._should_synchronize = True
        self._hooks = []
        if self._reduces:
            for p in trained:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._on_grad))

    @property
    def _parameter_names(self):
        """{parameter: the name its gradient is reduced under}, as upstream's optimizer keeps it
        (upstream's tests read it)."""
        return {p: self._names[id(p)] for group in self.param_groups for p in group["params"]}

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for k in self._delay:
            self._delay[k] = passes

    def _on_grad(self, p):
        if _pass_counted(self._delay, id(p)):
            self._reduction.due(p)

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those backward did not reach) and
        writes the results into the gradients."""
        if self._reduces:
            self._reduction.submit_the_rest(self._trained)
        self._reduction.wait_and_write()
        self._reset_step()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize: for `optimizer.synchronize()`,
        then gradient clipping, then `with optimizer.skip_synchronize(): optimizer.step()`."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() context after "
                    "optimizer.synchronize(). This can cause training slowdown. You may want to "
                    "consider using optimizer.skip_synchronize() context if you use "
                    "optimizer.synchronize() in your code.",
                    stacklevel=2,
                )
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def load_state_dict(self, *args, **kwargs):
        """torch's, after forgetting this step's progress (pending reductions, counted passes),
        as upstream: the loaded state starts a step afresh."""
        self._reset_step()
        return super(self.__class__, self).load_state_dict(*args, **kwargs)

    def _reset_step(self):
        self._handles.clear()
        for ready in getattr(self, "_ready", ()):
            ready.clear()
        for k in self._delay:
            self._delay[k] = self.backward_passes_per_step
        self._synchronized = False

    def zero_grad(self, set_to_none=True):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(). This is prohibited as it can cause "
                "a race condition."
            )
        return super(self.__class__, self).zero_grad(set_to_none=set_to_none)


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """op=hvd.Adasum, as upstream's delta optimizer: once a parameter's gradient is ready (every
    `backward_passes_per_step` passes), this rank steps the wrapped optimizer on that parameter
    alone, and the change it made (the delta) is combined across ranks with Adasum while the
    backward pass goes on; step() sets each parameter to its start plus the combined delta. The
    optimizer's state (momentum, Adam's moments) stays each rank's own, as upstream."""

    def __init__(
        self, params, named_parameters, compression, backward_passes_per_step, process_set
    ):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._names = _gradient_names(named_parameters, all_params)
        self._trained = [p for p in all_params if p.requires_grad]
        # Each parameter's value before its own step: the delta is reduced in the parameter's
        # memory (in place), then added back to this.
        self._starts = {id(p): torch.zeros_like(p, requires_grad=False) for p in self._trained}
        self.backward_passes_per_step = backward_passes_per_step
        self._delay = {id(p): backward_passes_per_step for p in self._trained}
        self._handles = {}  # id(param) -> (handle, param, compression ctx)
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self._trained]

    _parameter_names = _DistributedOptimizer._parameter_names
    set_backward_passes_per_step = _DistributedOptimizer.set_backward_passes_per_step
    load_state_dict = _DistributedOptimizer.load_state_dict
    _reset_step = _DistributedOptimizer._reset_step

    def _step_alone(self, p):
        """Steps the wrapped optimizer on `p` only; submits the Adasum of its delta."""
        start = self._starts[id(p)]
        start.copy_(p.detach())
        kept = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, kept):
                group["params"] = params
        # .data: outside autograd's version counter, as upstream (the backward pass has
        # finished with this parameter: its gradient hook ran).
        delta = p.data
        delta.sub_(start)
        sent, ctx = self._compression.compress(delta)
        h = mpi_ops.allreduce_async_(
            sent, name=self._names[id(p)], op=Adasum, process_set=self._process_set
        )
        self._handles[id(p)] = (h, p, ctx)

    def _on_grad(self, p):
        if _pass_counted(self._delay, id(p)):
            with torch.no_grad():
                self._step_alone(p)

    def synchronize(self):
        """Nothing to wait for before step(): the combined deltas are applied by step() itself
        (upstream's Adasum optimizer has no separate synchronization either)."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError(
            "Skipping synchronization is not supported when using Adasum optimizer."
        )
        yield  # never reached: the with statement gets the error above

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            # Parameters whose hook did not submit (backward did not reach them, or fewer
            # passes than backward_passes_per_step) step now, so every rank submits the same ops.
            for p in self._trained:
                if id(p) not in self._handles:
                    self._step_alone(p)
            for h, p, ctx in self._handles.values():
                delta = self._compression.decompress(mpi_ops.synchronize(h), ctx)
                start = self._starts[id(p)]
                start.add_(delta)
                p.data.copy_(start)
        self._reset_step()
        return loss

    zero_grad = _DistributedOptimizer.zero_grad


def DistributedOptimizer(
    optimizer,
    named_parameters=None,
    compression=Compression.none,
    backward_passes_per_step=1,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    sparse_as_dense=False,
    process_set=global_process_set,
):
    """An optimizer of `optimizer`'s class whose step() first averages the gradients across
    ranks (of `process_set`). `groups`: a number of groups, or lists of parameters, each
    reduced as one grouped allreduce once all its gradients are ready (`num_groups` is
    upstream's older spelling). op=Adasum, as upstream: each rank steps on its own gradients
    and the steps (model deltas) are combined with Adasum (_DistributedAdasumOptimizer)."""
    if op not in (Average, mpi_ops.Sum, Adasum):
        raise ValueError(f"op must be hvd.Average, hvd.Sum or hvd.Adasum, got {op!r}")
    if num_groups and groups:
        raise ValueError("give num_groups or groups, not both")
    if op == Adasum and _ps.set_size(process_set) > 1 and _in_set(process_set):
        if gradient_predivide_factor != 1.0:
            raise ValueError("gradient_predivide_factor needs op=Average")
        base = _DistributedAdasumOptimizer
        args = (named_parameters, compression, backward_passes_per_step, process_set)
    else:
        base = _DistributedOptimizer
        args = (
            named_parameters,
            compression,
            backward_passes_per_step,
            op,
            gradient_predivide_factor,
            groups or num_groups,
            sparse_as_dense,
            process_set,
        )
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(base.__dict__))
    return cls(optimizer.param_groups, *args)
