"""Distributed gradients: DistributedGradientTape, the tf.compat.v1 DistributedOptimizer and
BroadcastGlobalVariablesHook. reduce_gradients() is the one place gradients are reduced; the
Keras optimizer (horovod.tensorflow.keras) uses it too.

A step's dense gradients go out as one grouped allreduce per dtype (per group, if `groups` is
given): one negotiation and one fused collective instead of one op per gradient.
"""
import tensorflow as tf

from horovod.common import basics as _b
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Adasum, Average, Sum


def _scale_factors(op, gradient_predivide_factor):
    """(op, prescale, postscale): Average with a predivide factor f divides by f before the
    sum and by size/f after it (upstream's semantics, for fp16 range)."""
    if gradient_predivide_factor != 1.0:
        if op != Average:
            raise ValueError("gradient_predivide_factor needs op=Average")
        return Sum, 1.0 / gradient_predivide_factor, gradient_predivide_factor / _b.size()
    return op, 1.0, 1.0


def _groups_of(variables, groups):
    """Indices of the gradients in each group: one group by default; `groups` is a number of
    groups or a list of lists of variables (the others form one more group)."""
    n = len(variables)
    if not groups:
        return [list(range(n))]
    if isinstance(groups, int):
        if groups <= 0:
            raise ValueError(f"groups must be positive, got {groups}")
        k = min(groups, n) or 1
        return [list(range(i * n // k, (i + 1) * n // k)) for i in range(k)]
    position = {id(v): i for i, v in enumerate(variables)}
    out, seen = [], set()
    for group in groups:
        idx = [position[id(v)] for v in group if id(v) in position]
        seen.update(idx)
        if idx:
            out.append(idx)
    rest = [i for i in range(n) if i not in seen]
    return out + ([rest] if rest else [])


@tf.autograph.experimental.do_not_convert
def reduce_gradients(grads, variables, op=Average, compression=Compression.none,
                     sparse_as_dense=False, gradient_predivide_factor=1.0, groups=None,
                     name="DistributedGradients"):
    """Allreduces a list of gradients (None entries stay None) across ranks."""
    if op == Adasum:
        raise NotImplementedError("Adasum is not implemented in this Horovod; use op=hvd.Average")
    if _b.size() == 1:
        return list(grads)
    # Sparse gradients are gathered and divided by the size for Average, whatever the predivide
    # factor (as upstream): decide before Average-with-predivide becomes a scaled Sum below.
    sparse_op = Average if op == Average else Sum
    op, prescale, postscale = _scale_factors(op, gradient_predivide_factor)
    grads = list(grads)
    out = list(grads)
    dense = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            if sparse_as_dense:
                grads[i] = tf.convert_to_tensor(g)
            else:  # gathered values and indices, as upstream
                from horovod.tensorflow import allreduce
                out[i] = allreduce(g, op=sparse_op,
                                   name=f"{name}.sparse.{i}" if tf.executing_eagerly() else None)
                continue
        dense.append(i)
    # Eagerly, stable names let the engine's cached fast path take every step after the first;
    # in a tf.function the node names are stable by themselves.
    eager = tf.executing_eagerly()
    for gi, idx in enumerate(_groups_of([variables[i] for i in dense], groups)):
        members = [dense[j] for j in idx]
        compressed = [compression.compress(grads[i]) for i in members]
        by_dtype = {}
        for j, (t, _) in enumerate(compressed):
            by_dtype.setdefault(t.dtype, []).append(j)
        for dtype, js in by_dtype.items():
            key = f"{name}.{gi}.{dtype.name}" if eager else None
            reduced = _ops._allreduce([compressed[j][0] for j in js], op, key, prescale, postscale)
            for j, r in zip(js, reduced):
                out[members[j]] = compression.decompress(r, compressed[j][1])
    return out


class _DistributedGradientTape(tf.GradientTape):
    """A GradientTape whose gradient() returns gradients reduced across ranks. Built from the
    user's tape (same recorded operations), so it stays an instance of its class."""

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        grads = super().gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat = tf.nest.flatten(grads, expand_composites=False)
        reduced = reduce_gradients(flat, flat_sources, **self._hvd_options)
        return tf.nest.pack_sequence_as(grads, reduced)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=None, scale_local_gradients=True):
    """Wraps a tf.GradientTape so that tape.gradient() averages (op) the gradients across
    ranks, in one grouped allreduce per dtype."""
    if process_set is not None and getattr(process_set, "process_set_id", 0) != 0:
        raise NotImplementedError("process sets are not implemented in this Horovod")
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._hvd_options = dict(op=op, compression=compression, sparse_as_dense=sparse_as_dense,
                             gradient_predivide_factor=gradient_predivide_factor,
                             groups=groups or num_groups,
                             name=f"DistributedGradientTape")
    return tape


class _DistributedOptimizerV1(tf.compat.v1.train.Optimizer):
    """tf.compat.v1.train.Optimizer whose compute_gradients() reduces across ranks."""

    def __init__(self, optimizer, name, use_locking, options):
        self._optimizer = optimizer
        self._hvd_options = options
        super().__init__(name=name or "Distributed" + type(optimizer).__name__,
                         use_locking=use_locking)

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = zip(*grads_and_vars) if grads_and_vars else ((), ())
        reduced = reduce_gradients(list(grads), list(variables), **self._hvd_options)
        return list(zip(reduced, variables))

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=None, scale_local_gradients=True):
    """Wraps an optimizer so that its gradients are averaged (op) across ranks before they are
    applied: a tf.compat.v1.train.Optimizer, or a Keras optimizer (then the result is
    horovod.tensorflow.keras.DistributedOptimizer's, still an instance of its class)."""
    if process_set is not None and getattr(process_set, "process_set_id", 0) != 0:
        raise NotImplementedError("process sets are not implemented in this Horovod")
    if op == Adasum:
        raise NotImplementedError("Adasum is not implemented in this Horovod; use op=hvd.Average")
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if backward_passes_per_step != 1:
            raise NotImplementedError(
                "backward_passes_per_step > 1 is implemented for Keras optimizers only")
        options = dict(op=op, compression=compression, sparse_as_dense=sparse_as_dense,
                       gradient_predivide_factor=gradient_predivide_factor,
                       groups=groups or num_groups, name=name or "DistributedOptimizer")
        return _DistributedOptimizerV1(optimizer, name, use_locking, options)
    from horovod.tensorflow import keras as hvd_keras
    return hvd_keras.DistributedOptimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups)


def broadcast_global_variables(root_rank):
    """Graph mode (tf.compat.v1) only: an op assigning root_rank's values to every global
    variable. Eagerly, use broadcast_variables(model.variables) instead."""
    if tf.executing_eagerly():
        raise RuntimeError("broadcast_global_variables() needs graph mode (tf.compat.v1); "
                           "eagerly, call hvd.broadcast_variables(variables, root_rank)")
    from horovod.tensorflow.functions import broadcast_variables
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts root_rank's global variables once the session exists (MonitoredTrainingSession),
    so every rank starts from the same weights."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None

    def begin(self):
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
