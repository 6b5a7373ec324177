"""Horovod for PyTorch (`import horovod.torch as hvd`), with upstream's API on today's torch.

A single-process program becomes data-parallel with four changes: `hvd.init()`, pin a device per
`hvd.local_rank()` (`torch.cuda.set_device`), wrap the optimizer
(`hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())`), and broadcast the
initial state (`hvd.broadcast_parameters(model.state_dict(), 0)`,
`hvd.broadcast_optimizer_state(opt, 0)`). The ops run on the same engine as horovod.numpy and
horovod.tensorflow (one per process), through the shared submission layer (horovod/common): no
C++ build against libtorch, so one build serves every torch version.

mpi_ops (the collectives, their in-place and async forms, autograd), optimizer
(DistributedOptimizer), functions (broadcasts of parameters, optimizer state and objects),
sync_batch_norm (SyncBatchNorm), elastic (run, TorchState, ElasticSampler), compression.
"""

import torch  # noqa: F401  (fails early, with torch's own message, where torch is missing)

# Inside torch.compile the topology is a constant of the traced graph (the engine's own calls
# cannot be traced); hvd.rank() & co. stay plain calls in eager code.
from horovod.common import basics as _basics  # noqa: E402
from horovod.common.api import *  # noqa: F403  (init, rank, ProcessSet, Sum, ...)
from horovod.torch import elastic  # noqa: F401  (hvd.elastic.run, TorchState, ElasticSampler)
from horovod.torch.compression import Compression  # noqa: F401
from horovod.torch.functions import (  # noqa: F401
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from horovod.torch.mpi_ops import (  # noqa: F401
    allgather,
    allgather_async,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather,
    grouped_allgather_async,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    sparse_allreduce_async,
    synchronize,
)
from horovod.torch.optimizer import DistributedOptimizer  # noqa: F401
from horovod.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401

for _name in ("rank", "size", "local_rank", "local_size", "cross_rank", "cross_size"):
    globals()[_name] = torch.compiler.assume_constant_result(getattr(_basics, _name))
del _name
