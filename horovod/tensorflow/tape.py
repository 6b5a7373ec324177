"""DistributedGradientTape: a tf.GradientTape whose gradient() reduces across ranks."""

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
        reduced = _reduction.reduce_gradients(flat, flat_sources, **self._hvd_options)
        return tf.nest.pack_sequence_as(grads, reduced)


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
    ranks, in one grouped allreduce."""
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
    return tape
