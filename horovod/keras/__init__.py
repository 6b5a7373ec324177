"""`horovod.keras` is `horovod.tensorflow.keras`: Keras 3 here runs on TensorFlow, so there is
one implementation. The module (and its callbacks submodule) is aliased in sys.modules, so
both import paths give the same objects: one DistributedOptimizer class cache, and
isinstance checks on callbacks agree."""

import sys

import horovod.tensorflow.keras as _impl
import horovod.tensorflow.keras.callbacks as _callbacks

# The import system re-reads sys.modules after running this file, so `import horovod.keras`
# and `horovod.keras` (the attribute) both get _impl. Aliasing the submodule keeps
# `import horovod.keras.callbacks` from loading callbacks.py a second time.
sys.modules[__name__] = _impl
sys.modules[__name__ + ".callbacks"] = _callbacks
