"""NumPy inputs and references that every rank computes itself, for the engine's scenarios:
every rank regenerates all ranks' inputs from per-rank seeds, so it can check any result."""

import numpy as np

import horovod.numpy as hvd

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # the tests' requirements install it; without it bfloat16 is not covered
    BF16 = None

DTYPES = [
    np.dtype(t)
    for t in ("uint8", "int8", "uint16", "int16", "int32", "int64", "float16", "float32", "float64")
] + ([BF16] if BF16 is not None else [])
SHAPES = [(1,), (17,), (5, 3), (3, 2, 4), (100003,)]
OPS = {
    "sum": hvd.Sum,
    "average": hvd.Average,
    "min": hvd.Min,
    "max": hvd.Max,
    "product": hvd.Product,
}


def is_float(dt):
    return dt.kind == "f" or dt == BF16


def make(rank, shape, dt, op="sum", salt=0):
    """Deterministic input of `rank`, in a range where no reduction overflows."""
    rng = np.random.default_rng(1000 * rank + salt + 7)
    if op == "product":
        v = rng.choice([1, 2], size=shape) if not is_float(dt) else rng.uniform(0.8, 1.25, shape)
    elif dt.kind == "u":
        v = rng.integers(0, 40, size=shape)
    elif not is_float(dt):
        v = rng.integers(-20, 20, size=shape)
    else:
        v = rng.uniform(-2, 2, size=shape)
    return np.asarray(v).astype(dt)


def reference(arrays, op, dt):
    stack = np.stack([a.astype(np.float64) for a in arrays])
    n = len(arrays)
    if op == "sum":
        r = stack.sum(0)
    elif op == "average":
        r = stack.sum(0) / n
        if not is_float(dt):
            r = np.trunc(r)
    elif op == "min":
        r = stack.min(0)
    elif op == "max":
        r = stack.max(0)
    else:
        r = stack.prod(0)
    return r


def check(got, want, dt, what):
    assert got.dtype == dt, f"{what}: dtype {got.dtype} != {dt}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g = got.astype(np.float64)
    if is_float(dt):
        tol = {2: 3e-2, 4: 1e-5, 8: 1e-12}[dt.itemsize]
        ok = np.allclose(g, want, rtol=tol, atol=tol * 4)
    else:
        ok = np.array_equal(g, want.astype(dt).astype(np.float64))
    assert ok, (
        f"{what}: max abs error {np.max(np.abs(g - want))}\n"
        f" got {got.ravel()[:8]}\n want {want.ravel()[:8]}"
    )


def adasum(arrays, dt):
    """Upstream's Adasum of one tensor from every rank (a power of two of them): adjacent
    groups' results combined pairwise, level by level, a.b and the norms in float64, each
    level's result rounded to `dt` as the engine keeps it in the tensor's own dtype."""
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
