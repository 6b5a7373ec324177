"""Horovod for TensorFlow 2 (`import horovod.tensorflow as hvd`), with upstream's API.

A single-process program becomes data-parallel with four changes: `hvd.init()`, pin a device
per `hvd.local_rank()`, wrap the tape (`hvd.DistributedGradientTape`) or the optimizer
(`hvd.DistributedOptimizer`), and broadcast the initial state (`hvd.broadcast_variables`).
The ops run on the same engine as `horovod.numpy` (one per process). Errors are TensorFlow's
types: ranks that disagree about a tensor raise tf.errors.FailedPreconditionError naming it and
the ranks on each side; a rank that left raises tf.errors.AbortedError naming it.

This file only re-exports. One job per module: mpi_ops (the compiled ops, their names and
gradients), tensor_ops (hvd.allreduce, ...: upstream's arguments, tf.IndexedSlices and
compression around the ops of mpi_ops), reduction (reduce_gradients, the one place gradients
are reduced, used by the tape, both optimizers and Keras), tape (DistributedGradientTape,
PartialDistributedGradientTape), sync_batch_norm (SyncBatchNormalization), optimizer_v1
(DistributedOptimizer for tf.compat.v1 optimizers; Keras optimizers go to
horovod.tensorflow.keras), functions (broadcasts of variables and objects), compression.
"""

import tensorflow as tf  # noqa: F401  (hvd.tf, as before the split)

from horovod.common.api import *  # noqa: F403  (init, rank, ProcessSet, Sum, ...; re-exported)
from horovod.tensorflow import elastic  # noqa: F401  (hvd.elastic.*)
from horovod.tensorflow.compression import Compression  # noqa: F401
from horovod.tensorflow.functions import (  # noqa: F401
    BroadcastGlobalVariablesHook,
    allgather_object,
    broadcast_global_variables,
    broadcast_object,
    broadcast_object_fn,
    broadcast_variables,
)
from horovod.tensorflow.mpi_ops import (  # noqa: F401
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    size_op,
)
from horovod.tensorflow.optimizer_v1 import DistributedOptimizer  # noqa: F401
from horovod.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from horovod.tensorflow.tape import (  # noqa: F401
    DistributedGradientTape,
    PartialDistributedGradientTape,
)
from horovod.tensorflow.tensor_ops import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    broadcast,
    broadcast_,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
from horovod.tensorflow.util import _executing_eagerly  # noqa: F401  (upstream's tests use hvd's)
