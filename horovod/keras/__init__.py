"""`horovod.keras` is `horovod.tensorflow.keras`: Keras 3 here runs on TensorFlow, so there is
one implementation. The module (and its callbacks submodule) is aliased in sys.modules, so
both import paths give the same objects: one DistributedOptimizer class cache, and
isinstance checks on callbacks agree."""

import sys

import horovod.tensorflow.keras as _impl
import horovod.tensorflow.keras.callbacks as _callbacks
import horovod.tensorflow.keras.elastic as _elastic

# The import system re-reads sys.modules after running this file, so `import horovod.keras`
# and `horovod.keras` (the attribute) both get _impl. Aliasing the submodules keeps
# `import horovod.keras.callbacks` (and .elastic) from loading the file a second time.
sys.modules[__name__] = _impl
sys.modules[__name__ + ".callbacks"] = _callbacks
sys.modules[__name__ + ".elastic"] = _elastic
