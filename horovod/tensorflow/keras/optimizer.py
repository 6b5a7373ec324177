"""DistributedOptimizer (hvd.DistributedOptimizer of horovod.tensorflow.keras, and of
horovod.tensorflow for a Keras optimizer), PartialDistributedOptimizer, and load_model, which
makes a loaded model's optimizer distributed. Both Kerases (flavour.py):

- Keras 3: the optimizer's `apply()` is overridden, the entry point that both `model.fit`
  (through `apply_gradients`) and custom loops reach.
- Keras 2 (tf_keras, either optimizer family): `apply_gradients()` is overridden, which
  `model.fit` reaches through `minimize()` and custom loops call.

Either reduces the gradients with `horovod.tensorflow.reduction` (one grouped allreduce) before
the wrapped optimizer applies them; the gradients of registered local variables
(`register_local_var`, PartialDistributedOptimizer) stay local. It imports nothing above the
TensorFlow core's modules, so horovod.tensorflow can hand Keras optimizers to it.
"""

import keras
import tensorflow as tf

from horovod.common import basics as _b
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow import reduction as _reduction
from horovod.tensorflow import tape as _tape
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.keras import flavour as _flavour
from horovod.tensorflow.mpi_ops import Average


class _Horovod:
    """Per-optimizer Horovod state, kept out of Keras' tracking (set with object.__setattr__):
    the accumulators are not optimizer variables, so a saved model has exactly the variables
    of the user's plain optimizer class."""

    def __init__(
        self,
        name,
        compression,
        sparse_as_dense,
        gradient_predivide_factor,
        op,
        backward_passes_per_step,
        average_aggregated_gradients,
        groups,
        process_set=None,
        scale_local_gradients=True,
    ):
        if op == _ops.Adasum:  # upstream's refusal, for the same reason
            raise ValueError(
                "op == Adasum is not supported with Keras optimizers (as upstream: its Adasum "
                "optimizer reduces model deltas and exists for tf.compat.v1 optimizers only); "
                "use hvd.DistributedGradientTape(op=hvd.Adasum) in a custom loop, or a "
                "tf.compat.v1.train optimizer"
            )
        if int(backward_passes_per_step) < 1:
            raise ValueError(
                f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}"
            )
        self.reduce_options = dict(
            op=op,
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            gradient_predivide_factor=gradient_predivide_factor,
            groups=groups,
            name=name,
            process_set=process_set,
        )
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.average_aggregated_gradients = average_aggregated_gradients
        self.accumulators = {}  # id(variable) -> (variable, tf.Variable holding the local sum)
        self.counter = None  # local backward passes seen (tf.Variable, created lazily)
        self.local = _reduction.LocalVariables()
        self.scale_local_gradients = scale_local_gradients

    def reduce(self, grads, variables):
        return _reduction.reduce_all_but_local(
            grads, variables, self.local, self.scale_local_gradients, **self.reduce_options
        )


class _Common:
    """What both flavours' mixins share: local variables and accumulation."""

    def register_local_var(self, var):
        """Marks `var` as local to this rank: its gradient is not reduced (upstream's API;
        PartialDistributedOptimizer registers the local layers' weights)."""
        self._hvd.local.add(var)

    def _hvd_accumulate_and_apply(self, grads, variables, apply):
        """Adds this pass's gradients to local accumulators; every k-th pass reduces the sums
        (divided by k if average_aggregated_gradients) across ranks and calls apply(reduced).
        Between applications the optimizer does nothing, so `iterations` counts applied
        updates (as Keras' own gradient_accumulation_steps does for its `iterations`). The
        count is not reset by fit(): when an epoch's steps are not a multiple of k, a window
        spans two epochs (as upstream)."""
        state = self._hvd
        k = state.backward_passes_per_step
        if state.counter is None:
            with tf.init_scope():  # an eager variable even when first reached in tf.function
                state.counter = tf.Variable(
                    0, dtype=tf.int64, trainable=False, name="hvd_backward_passes"
                )
        accs = [None if g is None else _accumulator(v, state) for g, v in zip(grads, variables)]
        for g, acc in zip(grads, accs):
            if g is not None:  # IndexedSlices are accumulated dense
                acc.assign_add(tf.convert_to_tensor(g, dtype_hint=acc.dtype))
        count = state.counter.assign_add(1)

        def reduce_and_apply():
            scale = 1.0 / k if state.average_aggregated_gradients else 1.0
            summed = [
                None
                if a is None
                else (a.read_value() * tf.cast(scale, a.dtype) if scale != 1.0 else a.read_value())
                for a in accs
            ]
            apply(state.reduce(summed, variables))
            for a in accs:
                if a is not None:
                    a.assign(tf.zeros_like(a))

        # Every rank has the same count, so all take the same branch (the collective is in it).
        tf.cond(tf.equal(count % k, 0), reduce_and_apply, lambda: None)


def _accumulator(variable, state):
    entry = state.accumulators.get(id(variable))
    if entry is None or entry[0] is not variable:  # (an id can be reused after a variable dies)
        with tf.init_scope():
            acc = tf.Variable(
                tf.zeros(variable.shape, variable.dtype), trainable=False, name="hvd_accumulator"
            )
        entry = state.accumulators[id(variable)] = (variable, acc)
    return entry[1]


class _DistributedOptimizer(_Common):
    """Keras 3: mixin placed before the user's optimizer class in a dynamic subclass (same name
    and module, so the object still looks like and saves as the user's class)."""

    def __init__(self, *args, **kwargs):
        # Reached only when the distributed class itself is instantiated (e.g. from_config):
        # the optimizer gets the default Horovod options.
        super().__init__(*args, **kwargs)
        _attach(self, _default_state(type(self).__mro__[3]))

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        state = self._hvd
        if not grads:
            return super().apply(grads, trainable_variables)
        if trainable_variables is None:
            if not self.built:  # Keras raises its own error for this
                return super().apply(grads, trainable_variables)
            variables = list(self._trainable_variables)
        else:
            variables = list(trainable_variables)
            if not self.built:
                # Built here, outside the tf.cond below: variables cannot be created in a branch.
                with keras.name_scope(self.name, caller=self):
                    self.build(variables)
        if state.backward_passes_per_step == 1:
            return super().apply(state.reduce(grads, variables), trainable_variables)
        self._hvd_accumulate_and_apply(
            grads,
            variables,
            lambda reduced: super(_DistributedOptimizer, self).apply(reduced, trainable_variables),
        )


class _DistributedOptimizerV2(_Common):
    """Keras 2 (tf_keras, its current and its legacy optimizers): the same, on
    apply_gradients(grads_and_vars). Both families build their variables in an init_scope, so
    building inside the accumulation's tf.cond is fine."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _attach(self, _default_state(type(self).__mro__[3]))

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        state = self._hvd
        if not pairs:
            return super().apply_gradients(pairs, *args, **kwargs)
        if state.backward_passes_per_step == 1:
            reduced = state.reduce(grads, variables)
            return super().apply_gradients(list(zip(reduced, variables)), *args, **kwargs)
        base = super(_DistributedOptimizerV2, self)
        self._hvd_accumulate_and_apply(
            grads,
            variables,
            lambda reduced: base.apply_gradients(list(zip(reduced, variables)), *args, **kwargs),
        )
        return self.iterations


_MIXINS = (_DistributedOptimizer, _DistributedOptimizerV2)


def _agree_on_finite_gradients():
    """Keras' LossScaleOptimizer (model.compile puts one around the optimizer under the
    mixed_float16 policy) checks this rank's gradients for inf/NaN and on finding any skips the
    step, and with it its inner optimizer's apply(), where a DistributedOptimizer reduces the
    gradients: a rank skipping alone would pair the others' allreduce with its next step's,
    averaging different batches from then on. Around a DistributedOptimizer, every rank's
    verdict is combined (Min), so all ranks apply or all skip, and their loss scales stay equal.
    A LossScaleOptimizer wrapped by DistributedOptimizer needs none of this: it checks the
    reduced gradients, which are equal on every rank."""
    lso = keras.optimizers.LossScaleOptimizer
    local = lso.check_finite
    if getattr(local, "_horovod", False):
        return

    def check_finite(self, grads):
        finite = local(self, grads)
        inner = getattr(self, "inner_optimizer", None)
        if not isinstance(inner, _DistributedOptimizer) or _b.size() == 1:
            return finite
        name = f"{inner._hvd.reduce_options['name']}.finite" if tf.executing_eagerly() else None
        everywhere = _ops._allreduce([tf.cast(finite, tf.int32)], _ops.Min, name)[0]
        return tf.equal(everywhere, 1)

    check_finite._horovod = True
    lso.check_finite = check_finite


_agree_on_finite_gradients()

_CLASSES = {}  # user's optimizer class -> its distributed subclass


def _distributed_class(base):
    cls = _CLASSES.get(base)
    if cls is None:
        mixin = _DistributedOptimizer if issubclass(base, keras.optimizers.Optimizer) else None
        mixin = mixin or _DistributedOptimizerV2
        cls = type(
            base.__name__,
            (mixin, base),
            {
                "__module__": base.__module__,
                "__qualname__": base.__qualname__,
                "__doc__": base.__doc__,
            },
        )
        if mixin is _DistributedOptimizer:
            _serialize_as(cls, base)
        _CLASSES[base] = cls
    return cls


def _serialize_as(cls, base):
    """Makes Keras serialize `cls` exactly as `base` (same public or registered name), so a
    saved model loads with the user's plain optimizer class. Keras keeps these names in
    module dicts; only object->name entries are added, so lookups by name still give `base`.
    Without them (a future Keras), the same module and class names still load `base`."""
    try:
        from keras.src import api_export
        from keras.src.saving import object_registration
    except ImportError:
        return
    public = api_export.get_name_from_symbol(base)
    if public is not None:
        api_export.REGISTERED_OBJS_TO_NAMES[cls] = public
    if base in object_registration.GLOBAL_CUSTOM_NAMES:
        object_registration.GLOBAL_CUSTOM_NAMES[cls] = object_registration.GLOBAL_CUSTOM_NAMES[base]


def _plain_class(cls):
    # (the class, its mixin, _Common, the user's class, ...)
    return cls.__mro__[3] if issubclass(cls, _MIXINS) else cls


def _default_state(base, compression=Compression.none):
    return _Horovod("Distributed" + base.__name__, compression, False, 1.0, Average, 1, False, None)


def _attach(optimizer, state):
    object.__setattr__(optimizer, "_hvd", state)


def DistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    backward_passes_per_step=1,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """Returns a copy of the Keras optimizer (Keras 3, or tf_keras' with TF_USE_LEGACY_KERAS=1)
    whose `apply()`/`apply_gradients()` first reduces the gradients across ranks (op, Average
    by default) in one grouped allreduce.

    The result is an instance of a dynamic subclass of the optimizer's class (isinstance and
    the class name hold; `model.save` stores the plain class). A Keras 3 optimizer's copy
    shares its state (learning rate, variables if built), so keep using only the returned
    object; a tf_keras optimizer is rebuilt from its config (as upstream does).

    name: prefix of the allreduce names (default "Distributed<Class>"); the optimizer's own
    `name` is unchanged. backward_passes_per_step=k: accumulate k local gradients, then reduce
    and apply once (sum, or mean with average_aggregated_gradients=True); `iterations` counts
    applied updates. groups/num_groups: split the reduction into groups (see
    reduce_gradients). scale_local_gradients: divide the gradients of variables registered
    with `register_local_var` by the number of ranks (upstream's default). device_dense and
    device_sparse are accepted for upstream compatibility and have no effect (CPU only).
    """
    _ops._process_set_id(process_set)  # a set that does not exist: ValueError here
    state = _Horovod(
        name or "Distributed" + _plain_class(type(optimizer)).__name__,
        compression,
        sparse_as_dense,
        gradient_predivide_factor,
        op,
        backward_passes_per_step,
        average_aggregated_gradients,
        groups or num_groups or None,
        process_set,
        scale_local_gradients,
    )
    base = _plain_class(type(optimizer))
    cls = _distributed_class(_check_optimizer(optimizer, base))
    if issubclass(cls, _DistributedOptimizerV2):
        wrapped = cls.from_config(optimizer.get_config())
    else:
        # A shallow copy: the user's object keeps its class; the copy shares its state, so a
        # built (e.g. loaded) optimizer keeps its slots, and callable learning rates survive
        # (a get_config/from_config round trip would lose both).
        wrapped = object.__new__(cls)
        wrapped.__dict__.update(optimizer.__dict__)
        wrapped.__dict__.pop("_hvd", None)
    _attach(wrapped, state)
    return wrapped


def _check_optimizer(optimizer, base):
    if isinstance(optimizer, keras.optimizers.Optimizer) or _flavour.is_keras2_optimizer(optimizer):
        return base
    raise TypeError(
        "horovod.tensorflow.keras.DistributedOptimizer wraps a Keras optimizer (Keras 3's, or "
        f"tf_keras' under TF_USE_LEGACY_KERAS=1), got {type(optimizer).__name__} from "
        f"{type(optimizer).__module__}; for tf.compat.v1 optimizers use "
        "horovod.tensorflow.DistributedOptimizer"
    )


def PartialDistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    groups=None,
    process_set=None,
    local_layers=None,
    scale_local_gradients=True,
):
    """DistributedOptimizer whose `local_layers` (a Keras layer or a list of them) keep their
    own gradients: their trainable weights are registered with `register_local_var`, so each
    rank trains them on its own data while every other weight is reduced. With no local layers
    it is DistributedOptimizer."""
    layers = _tape._local_layers(local_layers)
    wrapped = DistributedOptimizer(
        optimizer,
        name=name,
        device_dense=device_dense,
        device_sparse=device_sparse,
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        op=op,
        groups=groups,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
    for layer in layers:
        for var in layer.trainable_weights:
            wrapped.register_local_var(var)
    return wrapped


def load_model(
    filepath,
    custom_optimizers=None,
    custom_objects=None,
    compression=Compression.none,
    legacy_opts=False,
):
    """Loads a model with the Keras tf.keras is (flavour.py), then the model's optimizer (with
    its restored state) becomes a DistributedOptimizer with `compression`. custom_optimizers:
    optimizer classes the file may name (besides Keras' own and registered ones);
    custom_objects: as in Keras. legacy_opts (upstream: the file holds tf_keras' legacy
    optimizers) is accepted and not needed: the class is read from the file."""
    objects = {cls.__name__: cls for cls in (custom_optimizers or [])}
    objects.update(custom_objects or {})
    model = _flavour.keras.models.load_model(filepath, custom_objects=objects)
    optimizer = getattr(model, "optimizer", None)
    if isinstance(optimizer, keras.optimizers.Optimizer) or _flavour.is_keras2_optimizer(optimizer):
        # In place: the loaded object is ours, and the model (and anything it compiled)
        # keeps referring to it.
        base = _plain_class(type(optimizer))
        optimizer.__class__ = _distributed_class(base)
        _attach(optimizer, _default_state(base, compression))
    return model
