"""`hvd.elastic` for PyTorch: `run`, `TorchState` (a model, its optimizer, and as keyword
arguments more modules and optimizers, ElasticSamplers and any picklable values) and
`ElasticSampler`, over the framework-neutral elastic loop of horovod/common/elastic.py (fixed
world: restore and re-raise; under `horovodrun --host-discovery-script`: the ranks end and the
driver relaunches a generation that resumes from the newest commit)."""

import copy
import math
import random

import torch

from horovod.common import basics as _b
from horovod.common.elastic import ObjectState, State, run_fn  # noqa: F401  (hvd.elastic.State)
from horovod.torch.functions import (
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)


def _reset():
    """Nothing in-process: the ranks stay the same on a fixed world, and an elastic launch
    re-forms the job by relaunching the processes instead."""


def run(func):
    """Decorator for the elastic training function `func(state, *args, **kwargs)`: the state is
    synced from rank 0 before each call; `state.commit()` inside func saves a restore point."""
    return run_fn(func, _reset)


class ElasticSampler(torch.utils.data.Sampler):
    """Shards a dataset among the ranks like DistributedSampler, and remembers how far the
    epoch got (`record_batch`) so that, kept in a TorchState, a restore or a new world size
    carries on with the samples not processed yet. Call `set_epoch(e)` at the END of each
    epoch (it clears the progress). `seed` must be the same on every rank."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset, self.shuffle, self.seed = dataset, shuffle, seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Every rank processed one more batch of `batch_size` samples."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Re-shards the samples left in this epoch among the current ranks."""
        self.num_replicas, self.rank = _b.size(), _b.rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num :]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        pad = self.total_size - len(indices)
        if pad > 0:
            # Repeated from the start (as DistributedSampler), as often as needed: fewer samples
            # left than ranks need more padding than there are samples, and every rank must take
            # num_samples steps or the ranks wait on each other.
            indices += (indices * math.ceil(pad / len(indices)))[:pad]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples


def _kind(value):
    """What TorchState tracks `value` by: its state_dict ("module", "optimizer") or its progress
    ("sampler"); None for a plain picklable value."""
    if isinstance(value, torch.nn.Module):
        return "module"
    if isinstance(value, torch.optim.Optimizer):
        return "optimizer"
    if isinstance(value, ElasticSampler):
        return "sampler"
    return None


class TorchState(ObjectState):
    """A model, its optimizer and extra values, all exposed as attributes. Every value is
    tracked by its type, the positional ones and keyword ones alike (`encoder=enc,
    enc_opt=enc_opt, sampler=sampler, epoch=0`): a torch.nn.Module by its state_dict (sync
    broadcasts rank 0's parameters and buffers), a torch.optim.Optimizer by its state_dict (sync
    broadcasts rank 0's with broadcast_optimizer_state), an ElasticSampler by its progress, and
    anything else as a picklable value. commit() saves them all in host memory; restore() loads
    the last save back. Assigning another module or optimizer to one of those attributes
    (`state.encoder = other`) tracks the new one."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        values = {"model": model, "optimizer": optimizer, **kwargs}
        # name -> kind, in the order given: every rank syncs them in the same order.
        kinds = {k: _kind(v) for k, v in values.items()}
        self._tracked = {k: kind for k, kind in kinds.items() if kind is not None}
        for k in list(values):
            # An unset model/optimizer is a plain None attribute, outside the synced values.
            if k in self._tracked or (k in ("model", "optimizer") and values[k] is None):
                setattr(self, k, values.pop(k))
        self._save_torch()
        super().__init__(bcast_object=broadcast_object, get_rank=_b.rank, **values)

    def _named(self, kind):
        return {k: getattr(self, k) for k, v in self._tracked.items() if v == kind}

    def _save_torch(self):
        self._saved_torch = {k: copy.deepcopy(getattr(self, k).state_dict()) for k in self._tracked}

    def _load_torch(self):
        for k in self._tracked:
            # A copy: an optimizer's load_state_dict keeps the given tensors (same dtype and
            # device) as its state, and its next step would change the saved copy in place.
            getattr(self, k).load_state_dict(copy.deepcopy(self._saved_torch[k]))

    def save(self):
        self._save_torch()
        super().save()

    def restore(self):
        self._load_torch()
        super().restore()

    def sync(self):
        for k, kind in self._tracked.items():
            if kind == "module":
                broadcast_parameters(getattr(self, k).state_dict(), root_rank=0)
            elif kind == "optimizer":
                broadcast_optimizer_state(getattr(self, k), root_rank=0)
        samplers = self._named("sampler")
        if samplers:
            states = broadcast_object({k: s.state_dict() for k, s in samplers.items()})
            for k, s in samplers.items():
                s.load_state_dict(states[k])
        self._save_torch()
        super().sync()

    def reset(self):
        for s in self._named("sampler").values():
            s.reset()  # the new world's shards of what is left

    def _snapshot(self):
        def cpu(tree):
            if isinstance(tree, torch.Tensor):
                return tree.detach().cpu()
            if isinstance(tree, dict):
                return {k: cpu(v) for k, v in tree.items()}
            if isinstance(tree, (list, tuple)):
                return type(tree)(cpu(v) for v in tree)
            return tree

        return {"objects": super()._snapshot(), "torch": cpu(self._saved_torch)}

    def _load_snapshot(self, snapshot):
        self._saved_torch = snapshot["torch"]
        self._load_torch()
        super()._load_snapshot(snapshot["objects"])
