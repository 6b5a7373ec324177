"""hvd.SyncBatchNormalization: batch normalization whose training-mode statistics are those of
the global batch, all ranks' batches together.

It derives from `tf.keras.layers.BatchNormalization`, so from whichever Keras tf.keras is
(Keras 3, or tf_keras under TF_USE_LEGACY_KERAS=1), and replaces only the computation of the
batch mean and variance; everything else (moving statistics, renorm, masks, serialization) is
Keras' own. Each rank sums its inputs, their squares and its count per channel, one Sum
allreduce adds them up, and mean = sum / count, variance = sum of squares / count - mean^2 (in
float64, so the subtraction loses nothing at float32 precision). Counting, rather than
averaging each rank's mean as upstream does, gives the global batch's statistics also when
ranks hold batches of different sizes (an empty one included). Gradients flow through the
allreduce to every rank's inputs, as in upstream.

Every rank must call the layer in training mode at the same steps (it is a collective);
in inference it uses the moving statistics and communicates nothing.
"""

import tensorflow as tf

from horovod.common import basics as _b
from horovod.tensorflow import mpi_ops as _ops

_BatchNormalization = tf.keras.layers.BatchNormalization
# tf_keras' layer computes the moments in _calculate_mean_and_var; Keras 3's in _moments.
_KERAS2 = hasattr(_BatchNormalization, "_calculate_mean_and_var")


def _allreduce_name():
    """The statistics allreduce's name. Not the layer's: Keras numbers automatic layer names per
    process ("sync_batch_normalization_1"), so a rank that built one such layer more named its
    allreduce differently and every rank waited for ever (issue 54, class 12). Eagerly, one
    fixed name for every layer, as upstream's eager ops share one: TensorFlow runs a thread's
    eager ops in order, each to its end (also with asynchronous execution), so two of them are
    never in flight at once, and the ranks call the layers in the same order. (Calling them from
    several threads at once would submit the name twice: the second is refused on that rank,
    never paired with another layer's tensor.) In a tf.function, where two layers' ops may run
    at once, None: the graph's unnamed-op numbering (mpi_ops._unnamed_node) is stable across
    ranks. The op is in the global set, whose names are its own. Layers of different widths
    called eagerly renegotiate at each call (the cached response has another shape); a width
    that differs across ranks stays a named mismatch, not a wait."""
    return "SyncBatchNormalization" if tf.executing_eagerly() else None


def _global_moments(inputs, axes, keepdims, mask):
    """Mean and variance over `axes` of every rank's `inputs` together (mask: weights of the
    inputs' leading dimensions, as Keras' own BatchNormalization takes it)."""
    x = tf.cast(inputs, tf.float64)
    if mask is None:
        weighted = x
        sums = tf.reduce_sum(x, axes, keepdims=keepdims)
        n = tf.reduce_prod(tf.gather(tf.shape(x, out_type=tf.int64), axes))
        count = tf.cast(n, tf.float64) * tf.ones_like(sums)
    else:
        weights = tf.broadcast_to(tf.expand_dims(tf.cast(mask, tf.float64), -1), tf.shape(x))
        weighted = x * weights
        sums = tf.reduce_sum(weighted, axes, keepdims=keepdims)
        count = tf.reduce_sum(weights, axes, keepdims=keepdims)
    squares = tf.reduce_sum(weighted * x, axes, keepdims=keepdims)
    local = tf.stack([sums, squares, count])
    if _b.size() > 1:
        local = _ops._allreduce([local], _ops.Sum, _allreduce_name())[0]
    sums, squares, count = tf.unstack(local)
    mean = sums / count
    variance = tf.maximum(squares / count - tf.square(mean), 0.0)
    return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)


@tf.keras.utils.register_keras_serializable(package="Horovod")
class SyncBatchNormalization(_BatchNormalization):
    """BatchNormalization whose training-mode batch statistics are computed over all ranks'
    batches (module doc). Takes BatchNormalization's arguments; `fused` (upstream's
    argument) must not be True: the fused kernel computes its statistics locally."""

    def __init__(self, fused=False, **kwargs):
        if fused:
            raise ValueError("SyncBatchNormalization does not support fused=True")
        if _KERAS2:
            kwargs["fused"] = False
        super().__init__(**kwargs)

    if _KERAS2:

        def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
            return _global_moments(inputs, list(reduction_axes), keep_dims, mask)

    else:

        def _moments(self, inputs, mask):
            return _global_moments(inputs, list(self._reduction_axes), False, mask)
