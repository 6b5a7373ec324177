"""Op names. Ops are matched across ranks by name: pass stable names ("grad/layer1") so that
repeated steps take the engine's cached fast path. An unnamed op gets a per-process counter
name, "<kind>.noname.<k>", which matches across ranks only if every rank issues unnamed ops in
the same order. Counters are kept per kind and process set: only a set's members advance its
counter, so the other sets' names stay alike on every rank. A grouped op's tensors are named
"<name>.<i>" by the engine (MemberName in csrc/engine/engine.h), for every frontend alike."""

import itertools

from horovod.common import engine_types as _types
from horovod.common.exceptions import NOT_INITIALIZED

_counters = {}  # (kind name, process set id) -> counter of unnamed ops


def reset():
    """A new world (hvd.init after a re-form): every rank counts unnamed ops from 0 again."""
    _counters.clear()


def unnamed(kind, process_set_id=0):
    """The next counter name of an unnamed op of `kind` (an op type's name, or e.g.
    "broadcast_object") in the process set."""
    counter = _counters.setdefault((kind, process_set_id), itertools.count())
    return f"{kind}.noname.{next(counter)}"


def op_name(op_type, name, process_set=None):
    """The name an op of `op_type` is negotiated under: `name`, or a counter name."""
    if not _types._core.is_initialized():
        raise ValueError(NOT_INITIALIZED)
    if name is None:
        return unnamed(_types.KIND_NAMES[op_type], getattr(process_set, "process_set_id", 0) or 0)
    if not isinstance(name, str):
        raise TypeError(f"a tensor name must be a str, got {type(name).__name__} {name!r}")
    return name


def object_op_name(kind, name, process_set_id=0):
    """The base name of an object collective's ops ("<kind>.<name>", or counted): it must not
    depend on the object, which a broadcast's other ranks typically pass as None."""
    return f"{kind}.{name}" if name is not None else unnamed(kind, process_set_id)
