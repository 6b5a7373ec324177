"""The checks of an op's arguments that every frontend makes, with one message per mistake.

Each check returns the value the engine takes or raises TypeError/ValueError with the reason,
which names no tensor: a frontend puts "tensor '<name>': " in front (`checked`), or hands the
bare reason to the engine as the op's `invalid` marker. A rank never raises such an error alone:
the op is submitted anyway, carrying the reason, and fails on every rank (the others would wait
for it otherwise); this rank then raises its own error (handles.py)."""

import operator

import numpy as np

from horovod.common import engine_types as _types

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def real_factor(what, value):
    """A scale factor (or timeout) as a float."""
    if not isinstance(value, (str, bytes, bytearray)):  # float('2') would accept a string
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            pass
    raise TypeError(f"{what} must be a real number, got {value!r}")


def root_rank(root):
    """A broadcast's root as an int (ints and NumPy integers; 1.5 is not silently 1). The
    engine checks [0, size) on an int32; what does not fit one is refused here."""
    try:
        root = operator.index(root)
    except TypeError:
        raise TypeError(f"root_rank must be an integer, got {root!r}") from None
    if not _INT32_MIN <= root <= _INT32_MAX:
        size = _types._core.topology()["size"]
        raise ValueError(f"broadcast root rank {root} is outside [0, {size})")
    return root


def reduce_op(op):
    if op in _types.REDUCE_OPS:
        return op
    raise ValueError(f"unknown reduce op {op!r}")


def split_values(splits):
    """Alltoall splits as a list of int64 values, read as given (no conversion first); the
    engine checks count, sign and sum."""
    try:
        a = np.asarray(splits, dtype=object)
    except (TypeError, ValueError) as e:
        raise ValueError(f"alltoall splits are not array-like: {e}") from None
    if a.ndim != 1:
        raise ValueError(
            f"alltoall splits must be 1-D (one split per rank), got shape {list(a.shape)}: "
            f"{splits!r}"
        )
    out = []
    for s in a:
        try:
            v = operator.index(s)
        except TypeError:
            raise TypeError(f"alltoall splits must be integers, got {s!r}") from None
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise ValueError(f"alltoall split {v} does not fit in int64")
        out.append(v)
    return out


def even_splits(shape, n):
    """Alltoall without splits: the first dimension cut evenly among n ranks. Refused as
    upstream refuses it, rather than split unevenly."""
    if len(shape) == 0:
        raise ValueError("alltoall needs at least one dimension")
    if shape[0] % n:
        raise ValueError(
            "alltoall without splits needs a first dimension divisible by the number of ranks "
            f"({n}), got {shape[0]} rows; pass splits to send uneven rows"
        )
    return [shape[0] // n] * n


def plain_reduction_args(op, prescale, postscale):
    """A reduce op and scale factors that need no check or conversion: the common case, tested
    at C speed so that a small op does not pay for the checks."""
    return type(prescale) is float and type(postscale) is float and op in _types.REDUCE_OPS


def reason(check, *args):
    """The reason `check(*args)` refuses its arguments, or None (for frontends that hand
    reasons to their kernels instead of raising)."""
    try:
        check(*args)
    except (TypeError, ValueError) as e:
        return str(e)
    return None


class Refused(Exception):
    """A bad argument found on this rank, named by tensor: args[0] is the TypeError or
    ValueError to raise once the negotiated op has failed on every rank."""

    @classmethod
    def of(cls, name, error):
        """`error` (TypeError or ValueError) named by the tensor it is about."""
        return cls(type(error)(f"tensor '{name}': {error}"))


def checked(name, check, *args):
    """check(*args), its error named by tensor and kept as Refused (raised by this rank only
    once the op, submitted with the reason, failed everywhere)."""
    try:
        return check(*args)
    except (TypeError, ValueError) as e:
        raise Refused.of(name, e) from None


def bare(error):
    """The reason of a Refused error without "tensor '<name>': ", which the engine's message
    puts in front."""
    return str(error).split("': ", 1)[-1]
