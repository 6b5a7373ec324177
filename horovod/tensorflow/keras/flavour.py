"""Which Keras this process uses: whatever `tf.keras` resolves to. That is Keras 3 (the `keras`
package) by default, and Keras 2 (the `tf_keras` package, `pip install tf-keras`) when
TF_USE_LEGACY_KERAS=1 is set before TensorFlow is imported: TensorFlow's own switch, read here
through tf.keras so that the two always agree.

`keras` is that module; classes Horovod derives from Keras (the callbacks,
SyncBatchNormalization) use it, decided once at import. Optimizers are told apart by their
type instead, so a Keras 3 optimizer still works in a process whose tf.keras is tf_keras.
"""

import sys

import tensorflow as tf


def _resolve():
    try:
        module = tf.keras.layers.Layer.__module__
    except ImportError as e:  # TF_USE_LEGACY_KERAS=1 without tf_keras installed
        raise ImportError(
            "TF_USE_LEGACY_KERAS is set, so tf.keras is tf_keras (Keras 2), which cannot be "
            f"imported ({e}): install tf-keras at TensorFlow's version (pip install "
            f"tf-keras=={tf.__version__}), or unset TF_USE_LEGACY_KERAS to use Keras 3"
        ) from e
    return module.startswith("tf_keras")


LEGACY = _resolve()  # True: tf.keras is tf_keras (Keras 2)

if LEGACY:
    import tf_keras as keras  # noqa: F401  (the module's API)
else:
    import keras  # noqa: F401


def is_keras2_optimizer(optimizer):
    """Whether `optimizer` is a tf_keras optimizer (its current family or its `legacy` one)."""
    tf_keras = sys.modules.get("tf_keras")  # loaded by whoever made a tf_keras optimizer
    if tf_keras is None:
        return False
    return isinstance(
        optimizer, (tf_keras.optimizers.Optimizer, tf_keras.optimizers.legacy.Optimizer)
    )


def optimizer_variables(optimizer):
    """An optimizer's variables: a property in Keras 3 and tf_keras' current optimizers, a
    method in tf_keras' legacy (OptimizerV2) ones."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def to_float(value):
    """A scalar (Keras 3 or tf_keras variable, tensor, number) as a Python float."""
    return float(tf.convert_to_tensor(value).numpy())
