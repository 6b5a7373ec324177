"""The engine's op types, reduce ops and dtypes, read from horovod._core: declared once, in
csrc/common/common.h, never restated in Python. Every frontend names them from here."""

import importlib

import numpy as np

_core = importlib.import_module("horovod._core")  # loads the engine; does not initialize MPI

OP_TYPES = dict(_core.op_types())  # {"allreduce": 0, ..., "join": 5, ...}
ALLREDUCE = OP_TYPES["allreduce"]
ALLGATHER = OP_TYPES["allgather"]
BROADCAST = OP_TYPES["broadcast"]
ALLTOALL = OP_TYPES["alltoall"]
REDUCESCATTER = OP_TYPES["reducescatter"]
JOIN = OP_TYPES["join"]
# The collectives' names by op type ("allreduce", ...): unnamed ops are counted under them.
KIND_NAMES = {v: k for k, v in OP_TYPES.items()}

REDUCE_OP_VALUES = dict(_core.reduce_ops())  # {"Sum": 0, "Average": 1, ...}
Sum = REDUCE_OP_VALUES["Sum"]
Average = REDUCE_OP_VALUES["Average"]
Min = REDUCE_OP_VALUES["Min"]
Max = REDUCE_OP_VALUES["Max"]
Product = REDUCE_OP_VALUES["Product"]
Adasum = REDUCE_OP_VALUES["Adasum"]
# The frontends accept these and no others; what each can reduce (dtypes, devices, rank counts)
# the engine decides at negotiation, so that every rank fails alike.
REDUCE_OPS = tuple(sorted(REDUCE_OP_VALUES.values()))

# The dtypes' names ("uint8", ..., "bfloat16", "bool"), which NumPy, TensorFlow and torch
# spell alike; every one is moved (allgather, broadcast, alltoall), the reducible ones reduced.
DATA_TYPES = tuple(name for name, _, _ in _core.data_types())
DATA_TYPE_VALUES = {name: value for name, value, _ in _core.data_types()}
REDUCIBLE_TYPES = tuple(name for name, _, reducible in _core.data_types() if reducible)

# bfloat16 in host memory without a NumPy bfloat16 (which NumPy lacks): the raw bits as uint16,
# tagged so that the binding reads them as bfloat16 (csrc/python/module.cc, IsTaggedBfloat16);
# outputs the binding makes from an input's dtype keep the tag.
BFLOAT16_BITS = np.dtype(np.uint16, metadata={"horovod_dtype": "bfloat16"})


def is_bfloat16_bits(dtype):
    """True for BFLOAT16_BITS (any dtype carrying its tag)."""
    meta = dtype.metadata
    return meta is not None and meta.get("horovod_dtype") == "bfloat16"
