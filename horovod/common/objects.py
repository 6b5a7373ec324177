"""broadcast_object and allgather_object over bytes: any picklable object crosses as a uint8
array, its size first. A frontend passes how it moves a uint8 NumPy array (its own broadcast
or allgather, and whatever its framework needs around them); the rest is here."""

import io
import pickle

import numpy as np

from horovod.common import naming
from horovod.common.exceptions import HorovodInvalidArgumentError

try:  # lambdas and locally defined classes pickle only with cloudpickle
    import cloudpickle as _pickle
except ImportError:
    _pickle = pickle


def to_bytes(obj):
    buf = io.BytesIO()
    _pickle.dump(obj, buf)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8)


def _pickled(obj):
    """(obj's bytes, their size) or, if obj does not pickle, (the error's text, minus its
    size) and the error: sent like the bytes, so that every rank learns of it and raises,
    instead of waiting for bytes that never come (raised on the failing rank alone, it left the
    others waiting)."""
    try:
        data = to_bytes(obj)
        return data, data.size, None
    except Exception as e:  # noqa: BLE001  (whatever pickling raises: every rank must hear)
        text = np.frombuffer(f"{type(e).__name__}: {e}".encode(), np.uint8)
        return text, -text.size, e


def _refused(what, failures, cause):
    """The error every rank raises when ranks' objects did not pickle: {rank: error text}."""
    who = "; ".join(f"rank {r}: {t}" for r, t in sorted(failures.items()))
    err = HorovodInvalidArgumentError(f"{what}: an object did not pickle, on {who}")
    err.__cause__ = cause
    return err


def broadcast_object(obj, is_root, broadcast, name=None, process_set_id=0, root_rank=0):
    """Root's `obj` on every rank. `broadcast(uint8 array, op name)` returns the root's array
    (a NumPy array or anything np.asarray takes). The ops are named after `name`, never after
    the object (the other ranks' may be None); unnamed calls are counted per process set, so
    every rank must make them in the same order. A root whose object does not pickle makes
    every rank raise HorovodInvalidArgumentError, naming it."""
    op_name = naming.object_op_name("broadcast_object", name, process_set_id)
    data, size, error = _pickled(obj) if is_root else (np.zeros(0, np.uint8), 0, None)
    size = int(np.asarray(broadcast(np.array([size], np.int64), f"{op_name}.size"))[0])
    if not is_root:
        data = np.zeros(abs(size), np.uint8)
    data = np.asarray(broadcast(data, f"{op_name}.data"))
    if size < 0:
        raise _refused(f"broadcast_object '{op_name}'", {root_rank: _text(data)}, error)
    return obj if is_root else pickle.loads(data.tobytes())


def allgather_object(obj, allgather, name=None, process_set_id=0):
    """Every rank's `obj` (each may differ, in type too), as a list indexed by rank in the
    set. `allgather(array, op name)` concatenates every rank's array. Objects that do not
    pickle make every rank raise HorovodInvalidArgumentError, naming their ranks."""
    op_name = naming.object_op_name("allgather_object", name, process_set_id)
    data, size, error = _pickled(obj)
    sizes = np.asarray(allgather(np.array([size], np.int64), f"{op_name}.sizes"))
    raw = np.asarray(allgather(data, f"{op_name}.data")).tobytes()
    out, failures, offset = [], {}, 0
    for rank, s in enumerate(int(s) for s in sizes):
        chunk = raw[offset : offset + abs(s)]
        offset += abs(s)
        if s < 0:
            failures[rank] = chunk.decode(errors="replace")
        out.append(chunk)
    if failures:
        raise _refused(f"allgather_object '{op_name}'", failures, error)
    return [pickle.loads(c) for c in out]


def _text(data):
    return np.asarray(data, np.uint8).tobytes().decode(errors="replace")
