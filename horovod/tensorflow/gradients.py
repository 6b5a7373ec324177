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
from horovod.tensorflow.mpi_ops import Average, Sum


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
    _ops._check_not_adasum(op)
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
    _ops._check_process_set(process_set)
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._hvd_options = dict(op=op, compression=compression, sparse_as_dense=sparse_as_dense,
                             gradient_predivide_factor=gradient_predivide_factor,
                             groups=groups or num_groups,
                             name="DistributedGradientTape")
    return tape


class _DistributedOptimizerV1(tf.compat.v1.train.Optimizer):
    """tf.compat.v1.train.Optimizer whose gradients are reduced across ranks.

    backward_passes_per_step=1: compute_gradients() returns the reduced gradients and
    apply_gradients() is the wrapped optimizer's.

    backward_passes_per_step=k > 1: the aggregation lives in apply_gradients(), so that
    compute_gradients() and apply_gradients() stay usable one without the other (minimize()
    is their composition). compute_gradients() returns the *local* gradients (no
    communication). Each run of the op from apply_gradients() adds them into local
    accumulators (one per variable, created lazily, non-trainable, in LOCAL_VARIABLES: not
    broadcast by BroadcastGlobalVariablesHook, not checkpointed, initialized by
    MonitoredTrainingSession's local init op or tf.compat.v1.local_variables_initializer())
    and counts the pass. Every k-th pass, inside a tf.cond on the count (all ranks have the
    same count, so all take the same branch), the sums (divided by k if
    average_aggregated_gradients) are reduced with reduce_gradients(), applied with the
    wrapped optimizer's apply_gradients(), and the accumulators are zeroed; on the other passes
    nothing is applied and no collective runs. tf.IndexedSlices gradients are scatter-added
    into dense accumulators and reduced dense. global_step, if given, is incremented on every
    pass (as upstream), after the (possibly skipped) update. One optimizer object drives one
    training op: its pass counter is shared by every op its apply_gradients() builds.
    """

    def __init__(self, optimizer, name, use_locking, options, backward_passes_per_step=1,
                 average_aggregated_gradients=False):
        self._optimizer = optimizer
        self._hvd_options = options
        self._backward_passes_per_step = int(backward_passes_per_step)
        self._average_aggregated_gradients = bool(average_aggregated_gradients)
        # (graph, pass counter, {variable ref: accumulator}), created on the first
        # apply_gradients() in a graph (eagerly: graph None).
        self._aggregation = None
        super().__init__(name=name or "Distributed" + type(optimizer).__name__,
                         use_locking=use_locking)

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        if self._backward_passes_per_step > 1:
            return grads_and_vars  # local: apply_gradients() aggregates, then reduces
        grads, variables = zip(*grads_and_vars) if grads_and_vars else ((), ())
        reduced = reduce_gradients(list(grads), list(variables), **self._hvd_options)
        return list(zip(reduced, variables))

    def apply_gradients(self, *args, **kwargs):
        if self._backward_passes_per_step == 1:
            return self._optimizer.apply_gradients(*args, **kwargs)
        return self._accumulate_and_apply(*args, **kwargs)

    def _accumulate_and_apply(self, grads_and_vars, global_step=None, name=None):
        k = self._backward_passes_per_step
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        if all(g is None for g in grads):
            raise ValueError("No gradients provided for any variable: "
                             f"{[v.name for v in variables]}.")
        counter, accs = self._aggregation_variables(grads, variables)
        eager = tf.executing_eagerly()
        # The wrapped optimizer runs in the caller's name scope, as it would without
        # aggregation: its non-slot variables (Adam's beta1_power, ...) keep their names, so
        # checkpoints do not depend on backward_passes_per_step.
        outer = "" if eager else tf.compat.v1.get_default_graph().get_name_scope()
        with tf.compat.v1.name_scope(name, self.get_name() + "_Aggregate") as scope:
            adds = []
            for g, acc in zip(grads, accs):
                if g is None:
                    continue
                if isinstance(g, tf.IndexedSlices):  # into the dense accumulator
                    adds.append(tf.raw_ops.ResourceScatterAdd(
                        resource=acc.handle, indices=g.indices,
                        updates=tf.convert_to_tensor(g.values, dtype_hint=acc.dtype)))
                else:
                    adds.append(acc.assign_add(tf.convert_to_tensor(g, dtype_hint=acc.dtype),
                                               read_value=False))
            with tf.control_dependencies(adds):
                counted = counter.assign_add(1, read_value=False)
            with tf.control_dependencies([counted]):
                count = counter.read_value()
            # The branch's ops get names of their own (the kernels negotiate by node name, and
            # a cond branch is a function graph whose names would repeat across optimizers).
            prefix = None if eager else tf.compat.v1.get_default_graph().unique_name("reduce")

            def reduce_and_apply():
                with tf.compat.v1.name_scope(None if eager else prefix + "/"):
                    summed = []
                    for acc in accs:
                        if acc is None:
                            summed.append(None)
                            continue
                        total = acc.read_value()
                        if self._average_aggregated_gradients:
                            total = total / tf.constant(k, total.dtype)
                        summed.append(total)
                    reduced = reduce_gradients(summed, variables, **self._hvd_options)
                with tf.compat.v1.name_scope(None if eager else outer + "/" if outer else ""):
                    applied = self._optimizer.apply_gradients(list(zip(reduced, variables)))
                with tf.control_dependencies([applied]):
                    zeroed = [acc.assign(tf.zeros(acc.shape, acc.dtype), read_value=False)
                              for acc in accs if acc is not None]
                with tf.control_dependencies(zeroed):
                    return tf.constant(True)

            # Tensors out of both branches (not ops), so that cond v1 and v2 both run the
            # branch's updates.
            applied = tf.cond(tf.equal(count % k, 0), reduce_and_apply,
                              lambda: tf.constant(False))
            if global_step is None:
                train_op = tf.group(applied, name=scope)
            else:
                with tf.control_dependencies([applied]):
                    if isinstance(global_step, tf.Variable) and hasattr(global_step, "handle"):
                        train_op = tf.raw_ops.AssignAddVariableOp(
                            resource=global_step.handle,
                            value=tf.constant(1, global_step.dtype.base_dtype), name=scope)
                    else:  # a reference variable
                        train_op = tf.compat.v1.assign_add(global_step, 1, name=scope).op
        if not eager:
            train_ops = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.TRAIN_OP)
            if train_op not in train_ops:
                train_ops.append(train_op)
        return train_op

    def _aggregation_variables(self, grads, variables):
        """(counter, accumulators aligned with variables: None where the gradient is None),
        created on first use, outside any control flow, under '<optimizer name>/aggregation'."""
        graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        if self._aggregation is None or self._aggregation[0] is not graph:
            self._aggregation = [graph, None, {}]
        state = self._aggregation
        local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        with tf.init_scope(), tf.compat.v1.name_scope(self.get_name() + "/aggregation/"):
            if state[1] is None:
                state[1] = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False,
                                                 name="counter", collections=local,
                                                 use_resource=True)
            accs = []
            for g, v in zip(grads, variables):
                if g is None:
                    accs.append(None)
                    continue
                acc = state[2].get(v.ref())
                if acc is None:
                    if not v.shape.is_fully_defined():
                        raise ValueError(f"backward_passes_per_step > 1 needs variables of "
                                         f"known shape; {v.name} has shape {v.shape}")
                    shape, dtype = v.shape, v.dtype.base_dtype
                    acc = tf.compat.v1.Variable(
                        lambda: tf.zeros(shape, dtype), dtype=dtype, trainable=False,
                        name=v.name.split(":")[0], collections=local, use_resource=True)
                    state[2][v.ref()] = acc
                accs.append(acc)
        return state[1], accs

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
    horovod.tensorflow.keras.DistributedOptimizer's, still an instance of its class).

    backward_passes_per_step=k > 1 accumulates k passes' local gradients, then reduces and
    applies their sum (their mean with average_aggregated_gradients=True) once; for a
    tf.compat.v1 optimizer see _DistributedOptimizerV1 (the aggregation is in
    apply_gradients(); compute_gradients() then returns local gradients)."""
    _ops._check_process_set(process_set)
    _ops._check_not_adasum(op)
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be >= 1, got "
                             f"{backward_passes_per_step}")
        options = dict(op=op, compression=compression, sparse_as_dense=sparse_as_dense,
                       gradient_predivide_factor=gradient_predivide_factor,
                       groups=groups or num_groups, name=name or "DistributedOptimizer")
        return _DistributedOptimizerV1(optimizer, name, use_locking, options,
                                       backward_passes_per_step, average_aggregated_gradients)
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
