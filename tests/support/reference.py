"""The one reference every suite's scenarios check against: the dtypes and reduce ops, each
rank's deterministic input, what a reduction or Adasum of them gives, and the comparison with a
result. Every rank regenerates every rank's input from per-rank seeds, so any rank can check any
result itself.

The core works on dtype names and NumPy float64 values; this module is also the NumPy adapter
(make, check, DTYPES: the engine's frontend, horovod.numpy). reference_tf.py and
reference_torch.py are the thin adapters of TensorFlow's and torch's tensors.
"""

import zlib

import numpy as np

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # the tests' requirements install it; without it bfloat16 is not covered
    BF16 = None

# Every dtype the reduce ops take, by name; the frameworks' adapters keep those they have.
REDUCE_DTYPES = (
    "uint8",
    "int8",
    "uint16",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)
MOVE_DTYPES = ("bool",) + REDUCE_DTYPES  # allgather, broadcast, alltoall also move bool
OP_NAMES = ("sum", "average", "min", "max", "product")
# Relative tolerance of a float result by its width in bytes (atol is 4 times it).
TOLERANCE = {2: 3e-2, 4: 1e-5, 8: 1e-12}


def ops(hvd):
    """{op name: the frontend's constant} of a Horovod frontend module (hvd.Sum, ...)."""
    return {name: getattr(hvd, name.capitalize()) for name in OP_NAMES}


def is_float(dtype):
    """Whether dtype (a name, or anything whose str() or .name is one) is a floating type."""
    return _name(dtype).startswith(("float", "bfloat"))


def _name(dtype):
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or str(dtype)
    return name.removeprefix("torch.")


def seed(*parts):
    """A deterministic seed of any repr-able parts (the same on every rank)."""
    return zlib.crc32(repr(parts).encode())


def values(rank, shape, dtype, op="sum", salt=0):
    """The input of `rank` before its cast to `dtype` (a name): deterministic, in a range where
    no reduction overflows any dtype (products of 1s and 2s, or of values near 1)."""
    name = _name(dtype)
    rng = np.random.default_rng(seed(rank, tuple(shape), name, op, salt))
    if name == "bool":
        return rng.integers(0, 2, size=shape)
    if op == "product":
        return rng.uniform(0.8, 1.25, shape) if is_float(name) else rng.choice([1, 2], size=shape)
    if name.startswith("uint"):
        return rng.integers(0, 40, size=shape)
    if not is_float(name):
        return rng.integers(-20, 20, size=shape)
    return rng.uniform(-2, 2, size=shape)


def reference(arrays, op, dtype):
    """What reducing the ranks' values (as float64) gives; integer Average truncates, as the
    engine's."""
    stack = np.stack([np.asarray(a, np.float64) for a in arrays])
    if op == "sum":
        return stack.sum(0)
    if op == "average":
        r = stack.sum(0) / len(arrays)
        return r if is_float(dtype) else np.trunc(r)
    if op == "min":
        return stack.min(0)
    if op == "max":
        return stack.max(0)
    return stack.prod(0)


def assert_close(got, want, dtype, what):
    """got (a result's values as float64) equals want (float64): floats within the tolerance of
    their width, everything else exactly once want is cast to the dtype."""
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    name = _name(dtype)
    if is_float(name):
        tol = TOLERANCE[2 if name in ("float16", "bfloat16") else np.dtype(name).itemsize]
        ok = np.allclose(got, want, rtol=tol, atol=4 * tol)
    else:
        ok = np.array_equal(got, want.astype(np.dtype(name)).astype(np.float64))
    assert ok, (
        f"{what}: max abs error {np.max(np.abs(got - want)) if got.size else 0}\n"
        f" got {got.ravel()[:8]}\n want {want.ravel()[:8]}"
    )


def rows_of(total, n):
    """Rows of each rank in reducescatter and default alltoall splits: the first ranks get one
    extra row when `total` does not divide evenly."""
    return [total // n + (1 if q < total % n else 0) for q in range(n)]


def adasum(arrays, dt):
    """Upstream's Adasum of one tensor from every rank (a power of two of them): adjacent
    groups' results combined pairwise, level by level, a.b and the norms in float64, each
    level's result rounded to `dt` (a NumPy dtype) as the engine keeps it in the tensor's own
    dtype."""
    level = [a.astype(np.float64) for a in arrays]
    tiny = np.sqrt(np.finfo(np.float64).tiny)
    while len(level) > 1:
        nxt = []
        for a, b in zip(level[0::2], level[1::2]):
            ab, aa, bb = (
                float(np.dot(a.ravel(), b.ravel())),
                float(np.sum(a * a)),
                float(np.sum(b * b)),
            )
            ca = 1.0 - ab / (2.0 * aa) if aa >= tiny else 1.0
            cb = 1.0 - ab / (2.0 * bb) if bb >= tiny else 1.0
            nxt.append((ca * a + cb * b).astype(dt).astype(np.float64))
        level = nxt
    return level[0]


# ---- the NumPy adapter (horovod.numpy) ---------------------------------------------------

# Every reduce dtype NumPy has (bfloat16 through ml_dtypes, when it is there).
DTYPES = [BF16 if n == "bfloat16" else np.dtype(n) for n in REDUCE_DTYPES]
DTYPES = [dt for dt in DTYPES if dt is not None]


def make(rank, shape, dt, op="sum", salt=0):
    """The NumPy array of `rank`'s input (values()) in dtype dt."""
    return np.asarray(values(rank, shape, dt, op, salt)).astype(dt)


def check(got, want, dt, what):
    """A NumPy result: of dtype dt, and assert_close to want."""
    assert got.dtype == dt, f"{what}: dtype {got.dtype} != {dt}"
    assert_close(got.astype(np.float64), want, dt, what)
