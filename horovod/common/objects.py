"""broadcast_object and allgather_object over bytes: any picklable object crosses as a uint8
array, its size first. A frontend passes how it moves a uint8 NumPy array (its own broadcast
or allgather, and whatever its framework needs around them); the rest is here."""

import io
import pickle

import numpy as np

from horovod.common import naming

try:  # lambdas and locally defined classes pickle only with cloudpickle
    import cloudpickle as _pickle
except ImportError:
    _pickle = pickle


def to_bytes(obj):
    buf = io.BytesIO()
    _pickle.dump(obj, buf)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8)


def broadcast_object(obj, is_root, broadcast, name=None, process_set_id=0):
    """Root's `obj` on every rank. `broadcast(uint8 array, op name)` returns the root's array
    (a NumPy array or anything np.asarray takes). The ops are named after `name`, never after
    the object (the other ranks' may be None); unnamed calls are counted per process set, so
    every rank must make them in the same order."""
    op_name = naming.object_op_name("broadcast_object", name, process_set_id)
    data = to_bytes(obj) if is_root else np.zeros(0, np.uint8)
    size = int(np.asarray(broadcast(np.array([data.size], np.int64), f"{op_name}.size"))[0])
    if not is_root:
        data = np.zeros(size, np.uint8)
    data = np.asarray(broadcast(data, f"{op_name}.data"))
    return obj if is_root else pickle.loads(data.tobytes())


def allgather_object(obj, allgather, name=None, process_set_id=0):
    """Every rank's `obj` (each may differ, in type too), as a list indexed by rank in the
    set. `allgather(array, op name)` concatenates every rank's array."""
    op_name = naming.object_op_name("allgather_object", name, process_set_id)
    data = to_bytes(obj)
    sizes = np.asarray(allgather(np.array([data.size], np.int64), f"{op_name}.sizes"))
    raw = np.asarray(allgather(data, f"{op_name}.data")).tobytes()
    out, offset = [], 0
    for s in sizes:
        out.append(pickle.loads(raw[offset : offset + int(s)]))
        offset += int(s)
    return out
