"""reduce_gradients(): the one place gradients are reduced across ranks. DistributedGradientTape,
both DistributedOptimizers (tf.compat.v1 and Keras) call it, and nothing else reduces gradients.

A step's dense gradients go out as one grouped allreduce (one per group, if `groups` is given):
one negotiation and one fused collective per dtype instead of one op per gradient. Sparse ones
(tf.IndexedSlices, e.g. of tf.gather on an embedding) are gathered, as upstream, in one grouped
allgather of values and one of indices per group, unless sparse_as_dense densifies them. Ranks
must agree on the number of gradients (a variable created on one rank only fails every rank).
"""

import tensorflow as tf

from horovod.common.gradients import groups_of as _groups_of
from horovod.common.gradients import scale_factors as _scale_factors
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow import tensor_ops as _tensor_ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Adasum, Average, Sum


@tf.autograph.experimental.do_not_convert
def reduce_gradients(
    grads,
    variables,
    op=Average,
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    groups=None,
    name="DistributedGradients",
    process_set=None,
):
    """Allreduces a list of gradients (None entries stay None) across ranks (of
    `process_set`, if given). Adasum combines each gradient as upstream does (ops/adasum.cc);
    it has no sparse form."""
    if op == Adasum and not sparse_as_dense and any(isinstance(g, tf.IndexedSlices) for g in grads):
        raise NotImplementedError(_tensor_ops.ADASUM_SPARSE)
    pid = _ops._process_set_id(process_set)
    size = _ops._set_rank_and_size(pid)[1]
    if size == 1:
        return list(grads)
    # Sparse gradients are gathered and divided by the size for Average, whatever the predivide
    # factor (as upstream): decide before Average-with-predivide becomes a scaled Sum below.
    sparse_op = Average if op == Average else Sum
    op, prescale, postscale = _scale_factors(op, gradient_predivide_factor, size)
    grads = list(grads)
    out = list(grads)
    present = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices) and sparse_as_dense:
            grads[i] = tf.convert_to_tensor(g)
        present.append(i)
    # Eagerly, stable names let the engine's cached fast path take every step after the first;
    # in a tf.function the node names are stable by themselves.
    eager = tf.executing_eagerly()
    for gi, idx in enumerate(_groups_of([variables[i] for i in present], groups)):
        members = [present[j] for j in idx]
        key = f"{name}.{gi}" if eager else None
        # Sparse members: gathered values and indices, as upstream (one grouped op each).
        reduced = _tensor_ops._reduce_members(
            [grads[i] for i in members], op, key, prescale, postscale, compression, pid, sparse_op
        )
        for i, r in zip(members, reduced):
            out[i] = r
    return out


def reduce_all_but_local(grads, variables, local, scale_local_gradients=True, **options):
    """reduce_gradients() for the gradients of variables not in `local` (a LocalVariables);
    the others stay this rank's own, divided by the number of ranks (of the process set) if
    scale_local_gradients (upstream's default since 0.26, kept so that a local layer trains as
    it does there)."""
    if not local:
        return reduce_gradients(grads, variables, **options)
    grads, out = list(grads), list(grads)
    shared = [i for i, v in enumerate(variables) if v not in local]
    reduced = reduce_gradients(
        [grads[i] for i in shared], [variables[i] for i in shared], **options
    )
    for i, g in zip(shared, reduced):
        out[i] = g
    size = _ops._set_rank_and_size(_ops._process_set_id(options.get("process_set")))[1]
    if scale_local_gradients and size > 1:
        for i, v in enumerate(variables):
            if v in local and out[i] is not None:
                out[i] = _divide(out[i], size)
    return out


def _divide(grad, n):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / n, grad.indices, grad.dense_shape)
    return grad / n


class LocalVariables:
    """Variables whose gradients stay local (register_local_var / register_local_source),
    compared by identity: Keras 3 variables define no hash, tf.Variables hash by reference."""

    def __init__(self):
        self._by_id = {}  # id -> the variable (kept alive, so the id stays its own)

    def add(self, variable):
        self._by_id[id(variable)] = variable

    def __contains__(self, variable):
        return id(variable) in self._by_id

    def __len__(self):
        return len(self._by_id)
