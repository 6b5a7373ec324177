"""`hvd.elastic` for PyTorch: `run`, `TorchState` (a model, its optimizer, ElasticSamplers and
any picklable values as keyword arguments) and `ElasticSampler`, over the framework-neutral
elastic loop of horovod/common/elastic.py (fixed world: restore and re-raise; under
`horovodrun --host-discovery-script`: the ranks end and the driver relaunches a generation that
resumes from the newest commit)."""

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
        indices += indices[: self.total_size - len(indices)]  # padded to a multiple of ranks
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples


class TorchState(ObjectState):
    """A model, its optimizer and extra values: ElasticSamplers (their progress) and anything
    picklable (`epoch=0, batch=0`), all exposed as attributes. sync() broadcasts rank 0's
    parameters, buffers, optimizer state and values; commit() saves them all in host memory;
    restore() loads the last save back."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model, self.optimizer = model, optimizer
        self._samplers = {k: v for k, v in kwargs.items() if isinstance(v, ElasticSampler)}
        for k, v in self._samplers.items():
            setattr(self, k, v)
        values = {k: v for k, v in kwargs.items() if k not in self._samplers}
        self._save_torch()
        super().__init__(bcast_object=broadcast_object, get_rank=_b.rank, **values)

    def _save_torch(self):
        self._saved_torch = {
            "model": copy.deepcopy(self.model.state_dict()) if self.model is not None else None,
            "optimizer": (
                copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None
            ),
            "samplers": {k: s.state_dict() for k, s in self._samplers.items()},
        }

    def _load_torch(self):
        saved = self._saved_torch
        if self.model is not None:
            self.model.load_state_dict(saved["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(saved["optimizer"])
        for k, s in self._samplers.items():
            s.load_state_dict(saved["samplers"][k])

    def save(self):
        self._save_torch()
        super().save()

    def restore(self):
        self._load_torch()
        super().restore()

    def sync(self):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0)
        if self._samplers:
            states = broadcast_object({k: s.state_dict() for k, s in self._samplers.items()})
            for k, s in self._samplers.items():
                s.load_state_dict(states[k])
        self._save_torch()
        super().sync()

    def reset(self):
        for s in self._samplers.values():
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
