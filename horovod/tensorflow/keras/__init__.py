"""Horovod for Keras on TensorFlow (`import horovod.tensorflow.keras as hvd`; `horovod.keras` is
the same module). It follows whichever Keras `tf.keras` is (flavour.py): Keras 3 by default,
Keras 2 (tf_keras) when TF_USE_LEGACY_KERAS=1 and tf-keras are set up.

The four changes to a `model.fit` script: `hvd.init()`; scale the learning rate by
`hvd.size()`; `opt = hvd.DistributedOptimizer(opt)`; and
`callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), ...]`. Give every rank its
shard of the data with the same number of batches per epoch (every step is a collective).

DistributedOptimizer (in optimizer.py) overrides the optimizer's `apply()` (Keras 3) or
`apply_gradients()` (Keras 2), which `model.fit` and custom loops reach, and reduces the
gradients with `horovod.tensorflow.reduction` (one grouped allreduce) first.
PartialDistributedOptimizer leaves given layers' gradients local. callbacks.py holds
hvd.callbacks.*; this file, the API and the helpers on values.

Mixed precision: wrap the LossScaleOptimizer, `hvd.DistributedOptimizer(
keras.optimizers.LossScaleOptimizer(opt))`, so the finiteness check sees the reduced
gradients and every rank takes the same branch (if compile() adds the LossScaleOptimizer
around a DistributedOptimizer, a rank whose local gradients overflow skips the collective).
Keras' own `gradient_accumulation_steps` still communicates every step; use
`backward_passes_per_step` to reduce once per k steps.

Limitations: CPU collectives only (`device_dense`/`device_sparse` are accepted and ignored).

`hvd.allreduce(op=hvd.Adasum)` works (CPU, a power-of-two number of ranks);
`DistributedOptimizer(op=hvd.Adasum)` is a ValueError, as upstream (its Adasum optimizer is for
tf.compat.v1 optimizers). On a machine with a GPU, compile with `jit_compile=False`: Keras picks
XLA there by default, and XLA cannot compile Horovod ops.
"""

import keras  # noqa: F401  (hvd.keras, as before the split)
import tensorflow as tf

from horovod.common.api import *  # noqa: F403  (init, rank, ProcessSet, Sum, ...; re-exported)
from horovod.tensorflow import tensor_ops as _tensor_ops
from horovod.tensorflow.compression import Compression  # noqa: F401
from horovod.tensorflow.functions import (  # noqa: F401
    allgather_object,
    broadcast_object,
    broadcast_variables,
)
from horovod.tensorflow.keras import (
    callbacks,  # noqa: F401  (hvd.callbacks.*)
    elastic,  # noqa: F401  (hvd.elastic.*)
)
from horovod.tensorflow.keras import flavour as _flavour
from horovod.tensorflow.keras.optimizer import (  # noqa: F401
    DistributedOptimizer,
    PartialDistributedOptimizer,
    load_model,
)
from horovod.tensorflow.mpi_ops import Adasum, Average, Max, Min, Product, Sum  # noqa: F401

# ---- collectives on values (upstream's Keras helpers) ----------------------------------------
# They take anything tf.convert_to_tensor accepts and return eager tensors. `name` is the
# negotiation name: pass one when ranks might issue unnamed ops in different orders.


def allreduce(
    value,
    name=None,
    average=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    op=None,
    compression=Compression.none,
    process_set=None,
):
    """Reduces `value` across ranks (Average by default)."""
    return _tensor_ops.allreduce(
        tf.convert_to_tensor(value),
        average=average,
        op=op,
        name=name,
        compression=compression,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        process_set=process_set,
    )


def allgather(value, name=None, process_set=None):
    """Concatenates every rank's `value` along the first dimension."""
    return _tensor_ops.allgather(tf.convert_to_tensor(value), name=name, process_set=process_set)


def broadcast(value, root_rank, name=None, process_set=None):
    """Returns root_rank's `value` on every rank."""
    return _tensor_ops.broadcast(
        tf.convert_to_tensor(value), root_rank, name=name, process_set=process_set
    )


def reducescatter(value, name=None, op=Average, process_set=None):
    """Reduces `value` across ranks and returns this rank's block of rows."""
    return _tensor_ops.reducescatter(
        tf.convert_to_tensor(value), op=op, name=name, process_set=process_set
    )


def broadcast_global_variables(root_rank, model=None):
    """Keras 3 has no global variable collection: with `model`, broadcasts root_rank's model
    weights and optimizer variables (what upstream's call did for the Keras session; random
    seed state stays rank-local); without it, says what to call instead. In fit(), prefer
    callbacks.BroadcastGlobalVariablesCallback."""
    if model is None:
        raise RuntimeError(
            "Keras 3 has no global variables: pass the model "
            "(hvd.broadcast_global_variables(root_rank, model)), call "
            "hvd.broadcast_variables(model.variables, root_rank), or use "
            "hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank) in model.fit()"
        )
    _broadcast_model(model, root_rank)


def _broadcast_model(model, root_rank):
    broadcast_variables(model.weights, root_rank)
    optimizer = getattr(model, "optimizer", None)
    variables = _flavour.optimizer_variables(optimizer) if optimizer is not None else []
    if variables:
        broadcast_variables(variables, root_rank)
