"""hvd.DistributedOptimizer for tf.compat.v1.train.Optimizer (graph mode, MonitoredTrainingSession):
gradients reduced in compute_gradients(), or accumulated over k passes in apply_gradients();
with op=hvd.Adasum, model deltas combined in apply_gradients() (_DistributedAdasumOptimizerV1).
Keras optimizers passed to hvd.DistributedOptimizer go to horovod.tensorflow.keras's.
"""

import functools

import tensorflow as tf

from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow import reduction as _reduction
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Adasum, Average


def _accumulated(grads, accs):
    """The ops adding each gradient into its accumulator; a tf.IndexedSlices is scatter-added
    into the dense accumulator. A None gradient adds nothing."""
    adds = []
    for g, acc in zip(grads, accs):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            adds.append(
                tf.raw_ops.ResourceScatterAdd(
                    resource=acc.handle,
                    indices=g.indices,
                    updates=tf.convert_to_tensor(g.values, dtype_hint=acc.dtype),
                )
            )
        else:
            adds.append(
                acc.assign_add(tf.convert_to_tensor(g, dtype_hint=acc.dtype), read_value=False)
            )
    return adds


def _sums(accs, k, average):
    """The accumulators' values (their mean over the k passes with `average`); None where a
    variable has no accumulator (its gradient is None)."""
    summed = []
    for acc in accs:
        if acc is None:
            summed.append(None)
            continue
        total = acc.read_value()
        if average:
            total = total / tf.constant(k, total.dtype)
        summed.append(total)
    return summed


def _zeroed(accs):
    """The ops setting every accumulator back to zeros."""
    return [
        acc.assign(tf.zeros(acc.shape, acc.dtype), read_value=False)
        for acc in accs
        if acc is not None
    ]


def _new_accumulator(variable, collections):
    """A zero-initialized, non-trainable resource variable of `variable`'s shape and dtype,
    named after it, in `collections`."""
    if not variable.shape.is_fully_defined():
        raise ValueError(
            f"backward_passes_per_step > 1 needs variables of "
            f"known shape; {variable.name} has shape {variable.shape}"
        )
    shape, dtype = variable.shape, variable.dtype.base_dtype
    return tf.compat.v1.Variable(
        functools.partial(tf.zeros, shape, dtype),
        dtype=dtype,
        trainable=False,
        name=variable.name.split(":")[0],
        collections=collections,
        use_resource=True,
    )


def _step_counted(global_step, applied, scope):
    """The training op, named `scope`: `applied` and, if given, global_step incremented after it
    (on every pass, as upstream)."""
    if global_step is None:
        return tf.group(applied, name=scope)
    with tf.control_dependencies([applied]):
        if isinstance(global_step, tf.Variable) and hasattr(global_step, "handle"):
            return tf.raw_ops.AssignAddVariableOp(
                resource=global_step.handle,
                value=tf.constant(1, global_step.dtype.base_dtype),
                name=scope,
            )
        return tf.compat.v1.assign_add(global_step, 1, name=scope).op  # a reference variable


def _add_train_op(train_op, eager):
    """Adds the training op to the graph's TRAIN_OP collection once, as tf.compat.v1's own
    apply_gradients() does."""
    if eager:
        return
    train_ops = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.TRAIN_OP)
    if train_op not in train_ops:
        train_ops.append(train_op)


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

    # The collection of this optimizer's own variables (counter, accumulators): local, as
    # upstream's aggregation variables (per-rank partial sums; the Adasum subclass differs).
    _own_variables_collection = tf.compat.v1.GraphKeys.LOCAL_VARIABLES

    def __init__(
        self,
        optimizer,
        name,
        use_locking,
        options,
        backward_passes_per_step=1,
        average_aggregated_gradients=False,
    ):
        self._optimizer = optimizer
        self._hvd_options = options
        self._backward_passes_per_step = int(backward_passes_per_step)
        self._average_aggregated_gradients = bool(average_aggregated_gradients)
        # (graph, pass counter, {variable ref: accumulator}), created on the first
        # apply_gradients() in a graph (eagerly: graph None).
        self._aggregation = None
        super().__init__(
            name=name or "Distributed" + type(optimizer).__name__, use_locking=use_locking
        )

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        if self._backward_passes_per_step > 1:
            return grads_and_vars  # local: apply_gradients() aggregates, then reduces
        grads, variables = zip(*grads_and_vars) if grads_and_vars else ((), ())
        reduced = _reduction.reduce_gradients(list(grads), list(variables), **self._hvd_options)
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
            raise ValueError(
                f"No gradients provided for any variable: {[v.name for v in variables]}."
            )
        counter, accs = self._aggregation_variables(grads, variables)
        eager = tf.executing_eagerly()
        # The wrapped optimizer runs in the caller's name scope, as it would without
        # aggregation: its non-slot variables (Adam's beta1_power, ...) keep their names, so
        # checkpoints do not depend on backward_passes_per_step.
        outer = "" if eager else tf.compat.v1.get_default_graph().get_name_scope()
        with tf.compat.v1.name_scope(name, self.get_name() + "_Aggregate") as scope:
            adds = _accumulated(grads, accs)
            with tf.control_dependencies(adds):
                counted = counter.assign_add(1, read_value=False)
            with tf.control_dependencies([counted]):
                count = counter.read_value()
            # The branch's ops get names of their own (the kernels negotiate by node name, and
            # a cond branch is a function graph whose names would repeat across optimizers).
            prefix = None if eager else tf.compat.v1.get_default_graph().unique_name("reduce")

            def reduce_and_apply():
                with tf.compat.v1.name_scope(None if eager else prefix + "/"):
                    summed = _sums(accs, k, self._average_aggregated_gradients)
                    reduced = _reduction.reduce_gradients(summed, variables, **self._hvd_options)
                with tf.compat.v1.name_scope(None if eager else outer + "/" if outer else ""):
                    applied = self._optimizer.apply_gradients(list(zip(reduced, variables)))
                with tf.control_dependencies([applied]):
                    zeroed = _zeroed(accs)
                with tf.control_dependencies(zeroed):
                    return tf.constant(True)

            # Tensors out of both branches (not ops), so that cond v1 and v2 both run the
            # branch's updates.
            applied = tf.cond(tf.equal(count % k, 0), reduce_and_apply, lambda: tf.constant(False))
            train_op = _step_counted(global_step, applied, scope)
        _add_train_op(train_op, eager)
        return train_op

    def _aggregation_variables(self, grads, variables):
        """(counter, accumulators aligned with variables: None where the gradient is None),
        created on first use, outside any control flow, under '<optimizer name>/aggregation',
        in _own_variables_collection."""
        graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        if self._aggregation is None or self._aggregation[0] is not graph:
            self._aggregation = [graph, None, {}]
        state = self._aggregation
        collections = [self._own_variables_collection]
        with tf.init_scope(), tf.compat.v1.name_scope(self.get_name() + "/aggregation/"):
            if state[1] is None:
                state[1] = tf.compat.v1.Variable(
                    0,
                    dtype=tf.int64,
                    trainable=False,
                    name="counter",
                    collections=collections,
                    use_resource=True,
                )
            accs = []
            for g, v in zip(grads, variables):
                if g is None:
                    accs.append(None)
                    continue
                acc = state[2].get(v.ref())
                if acc is None:
                    acc = state[2][v.ref()] = _new_accumulator(v, collections)
                accs.append(acc)
        return state[1], accs

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


class _DistributedAdasumOptimizerV1(_DistributedOptimizerV1):
    """op=hvd.Adasum around a tf.compat.v1 optimizer, as upstream's: the ranks' model *deltas*
    are combined, not their gradients (Adasum needs whole updates; upstream's guide).

    compute_gradients() returns the local gradients. Each run of apply_gradients()'s op
    applies them with the wrapped optimizer on this rank alone; every k-th pass
    (backward_passes_per_step) each variable's change since the last combination, var - start,
    is combined across ranks with Adasum, and start and the variable both become start plus
    the combined change. `start` is one copy per variable (the base class's accumulators),
    taken from the variable on the first pass. global_step, if given, is the wrapped
    optimizer's: incremented on every pass.

    The counter and starts are GLOBAL_VARIABLES, as upstream's step_count and delta_start
    slots: tf.compat.v1.global_variables_initializer() initializes them with the model, and
    checkpoints and BroadcastGlobalVariablesHook include them (equal on every rank)."""

    _own_variables_collection = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        k = self._backward_passes_per_step
        grads_and_vars = list(grads_and_vars)
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        counter, starts = self._aggregation_variables(grads, variables)
        pairs = [(v, s) for v, s in zip(variables, starts) if s is not None]
        eager = tf.executing_eagerly()
        with tf.compat.v1.name_scope(name, self.get_name() + "_Adasum") as scope:

            def take_starts():
                taken = [s.assign(v.read_value(), read_value=False) for v, s in pairs]
                with tf.control_dependencies(taken):
                    return tf.constant(True)

            first = tf.equal(counter.read_value(), 0)
            started = tf.cond(first, take_starts, lambda: tf.constant(False))
            with tf.control_dependencies([started]):
                local = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step)
            with tf.control_dependencies([local]):
                counted = counter.assign_add(1, read_value=False)
            with tf.control_dependencies([counted]):
                count = counter.read_value()
            # Names of the branch's ops of their own, as in _accumulate_and_apply.
            prefix = None if eager else tf.compat.v1.get_default_graph().unique_name("adasum")

            def combine():
                with tf.compat.v1.name_scope(None if eager else prefix + "/"):
                    deltas = [v.read_value() - s.read_value() for v, s in pairs]
                    combined = _reduction.reduce_gradients(
                        deltas, [v for v, _ in pairs], **self._hvd_options
                    )
                    moved = []
                    for (v, s), d in zip(pairs, combined):
                        moved.append(v.assign(s.assign_add(d), read_value=False))
                with tf.control_dependencies(moved):
                    return tf.constant(True)

            applied = tf.cond(tf.equal(count % k, 0), combine, lambda: tf.constant(False))
            train_op = tf.group(applied, name=scope)
        _add_train_op(train_op, eager)
        return train_op


def DistributedOptimizer(
    optimizer,
    name=None,
    use_locking=False,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    backward_passes_per_step=1,
    op=Average,
    gradient_predivide_factor=1.0,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """Wraps an optimizer so that its gradients are averaged (op) across ranks before they are
    applied: a tf.compat.v1.train.Optimizer, or a Keras optimizer (then the result is
    horovod.tensorflow.keras.DistributedOptimizer's, still an instance of its class).

    backward_passes_per_step=k > 1 accumulates k passes' local gradients, then reduces and
    applies their sum (their mean with average_aggregated_gradients=True) once; for a
    tf.compat.v1 optimizer see _DistributedOptimizerV1 (the aggregation is in
    apply_gradients(); compute_gradients() then returns local gradients).

    op=hvd.Adasum: for a tf.compat.v1 optimizer, upstream's delta optimizer (each rank steps
    alone, the steps are combined with Adasum: _DistributedAdasumOptimizerV1); for a Keras
    optimizer a ValueError, as upstream."""
    _ops._process_set_id(process_set)  # a set that does not exist: ValueError here
    if op == Adasum and average_aggregated_gradients:
        raise ValueError("Adasum does not support average_aggregated_gradients=True (as upstream)")
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if int(backward_passes_per_step) < 1:
            raise ValueError(
                f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}"
            )
        options = dict(
            op=op,
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            gradient_predivide_factor=gradient_predivide_factor,
            groups=groups or num_groups,
            name=name or "DistributedOptimizer",
            process_set=process_set,
        )
        cls = _DistributedAdasumOptimizerV1 if op == Adasum else _DistributedOptimizerV1
        return cls(
            optimizer,
            name,
            use_locking,
            options,
            backward_passes_per_step,
            average_aggregated_gradients,
        )
    # Keras' optimizer lives a floor up; importing it here, not at the top, keeps
    # `import horovod.tensorflow` from importing Keras.
    from horovod.tensorflow.keras import optimizer as keras_optimizer

    return keras_optimizer.DistributedOptimizer(
        optimizer,
        name=name,
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        num_groups=num_groups,
        groups=groups,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
