"""DistributedGradientTape: a tf.GradientTape whose gradient() reduces across ranks, and
PartialDistributedGradientTape, whose local layers' gradients stay local."""

import tensorflow as tf

from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow import reduction as _reduction
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import Average


class _DistributedGradientTape(tf.GradientTape):
    """A GradientTape whose gradient() returns gradients reduced across ranks. Built from the
    user's tape (same recorded operations), so it stays an instance of its class."""

    def gradient(
        self,
        target,
        sources,
        output_gradients=None,
        unconnected_gradients=tf.UnconnectedGradients.NONE,
    ):
        grads = super().gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat = tf.nest.flatten(grads, expand_composites=False)
        reduced = _reduction.reduce_all_but_local(
            flat, flat_sources, self._hvd_local, self._hvd_scale_local, **self._hvd_options
        )
        return tf.nest.pack_sequence_as(grads, reduced)

    def register_local_source(self, source):
        """Marks `source` (a variable) as local to this rank: its gradient is not reduced
        (divided by the number of ranks if scale_local_gradients, as upstream)."""
        self._hvd_local.add(source)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None):
        """gradient(), split into ([(source, local gradient)], [(source, reduced gradient)])
        by whether the source is registered local (upstream's API)."""
        grads = self.gradient(target, sources, output_gradients)
        local, shared = [], []
        for s, g in zip(sources, grads):
            (local if s in self._hvd_local else shared).append((s, g))
        return local, shared


def DistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """Wraps a tf.GradientTape so that tape.gradient() averages (op) the gradients across
    ranks, in one grouped allreduce; sources registered with register_local_source keep their
    own gradient (divided by the number of ranks if scale_local_gradients)."""
    _ops._process_set_id(process_set)  # a set that does not exist: ValueError here
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._hvd_options = dict(
        op=op,
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        groups=groups or num_groups,
        name="DistributedGradientTape",
        process_set=process_set,
    )
    tape._hvd_local = _reduction.LocalVariables()
    tape._hvd_scale_local = scale_local_gradients
    return tape


def PartialDistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=None,
    local_layers=None,
    scale_local_gradients=True,
):
    """DistributedGradientTape whose `local_layers` (a Keras layer or a list of them) keep
    their own gradients: their trainable weights are registered with register_local_source.
    With no local layers it is DistributedGradientTape."""
    layers = _local_layers(local_layers)
    tape = DistributedGradientTape(
        gradtape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
        scale_local_gradients,
    )
    for layer in layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape


def _local_layers(local_layers):
    """local_layers as a list (upstream accepts one Keras layer or a collection of them). A
    layer is anything with trainable_weights, so both Keras 3 and tf_keras layers qualify
    without importing either here."""
    if local_layers is None:
        return []
    if hasattr(local_layers, "trainable_weights"):
        return [local_layers]
    local_layers = list(local_layers)
    bad = [type(x).__name__ for x in local_layers if not hasattr(x, "trainable_weights")]
    if bad:
        raise ValueError(f"local_layers must be Keras layers, got {', '.join(bad)}")
    return local_layers
