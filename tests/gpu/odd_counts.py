"""Every collective at element counts that are no multiple of anything a library blocks by
(1, 31, 17**3 = 4913, 2**20 + 7), for every reducible dtype, against NumPy (in float64). One
rank's NCCL left the tail of ncclAvg and pre-multiplied sums unwritten at such counts (NCCL
2.19.1 to 2.29.6, NVIDIA/nccl#1950: the last of 17x17x17 floats), which counts of 1000 or 12 never
showed: each check compares every element, the last ones included. Run by device_checks.py
(`collectives`, and `odd_counts` alone) through CuPy or torch on a GPU, and on host arrays
(HVD_DEVICE_LIB=numpy) where the CPU path runs the same expectations.

bfloat16 goes through torch on a GPU, through ml_dtypes' bfloat16 as Horovod's tagged uint16 bits
(horovod.common.engine_types.BFLOAT16_BITS) on host arrays; CuPy has no bfloat16.
"""

import numpy as np

import horovod.numpy as hvd

COUNTS = (1, 31, 17**3, 2**20 + 7)
DTYPES = ("uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64")
# Per element, relative to max(1, |want|): exact for integers; one or two roundings otherwise.
TOLERANCE = {"float16": 2e-2, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}


def _bf16_numpy():
    try:
        import ml_dtypes

        return ml_dtypes.bfloat16
    except ImportError:
        return None


def dtypes(lib):
    """The dtypes `lib` can hand over, and a note for those it cannot."""
    if lib.name == "cupy":
        return [d for d in DTYPES if d != "bfloat16"], "bfloat16 skipped: CuPy has none"
    if lib.name == "numpy" and _bf16_numpy() is None:
        return [d for d in DTYPES if d != "bfloat16"], "bfloat16 skipped: no ml_dtypes"
    return list(DTYPES), ""


def make(lib, values, dt):
    """float64 `values` (exact in `dt`) as `lib`'s array of dtype `dt`."""
    if dt != "bfloat16":
        return lib.to(values.astype(dt))
    if lib.name == "torch":
        t = lib.mod.from_numpy(values.astype(np.float32)).to(lib.mod.bfloat16)
        return t.to(f"cuda:{lib.dev}")
    from horovod.common.engine_types import BFLOAT16_BITS

    return values.astype(_bf16_numpy()).view(np.uint16).view(BFLOAT16_BITS)


def values_of(lib, x, dt):
    """`lib`'s array back as float64."""
    if dt != "bfloat16":
        return lib.host(x).astype(np.float64)
    if lib.name == "torch":
        return x.float().cpu().numpy().astype(np.float64)
    return np.asarray(x).view(np.uint16).view(_bf16_numpy()).astype(np.float64)


def _pattern(n, r, dt, small=False):
    """Rank r's values: every element differs from its neighbours, so a stale tail shows."""
    i = np.arange(n, dtype=np.int64)
    if small:  # products: 1 or 2
        return ((i + r) % 2 + 1).astype(np.float64)
    v = (i * 7 + r * 3 + 1) % 11 - 5
    return (v + 5 if dt == "uint8" else v).astype(np.float64)


def _trunc_div(a, n):
    return np.trunc(a / n)


def _check(lib, what, out, want, dt):
    assert lib.is_device(out), f"{what}: result is {type(out).__name__}, not on the device"
    got = values_of(lib, out, dt)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    tol = TOLERANCE.get(dt, 0.0)
    bad = np.nonzero(np.abs(got - want) > tol * np.maximum(1.0, np.abs(want)))[0]
    assert bad.size == 0, (
        f"{what}: {bad.size} of {want.size} elements wrong, first at {bad[0]} "
        f"(last element: got {got[-1]!r}, want {want[-1]!r})"
    )
    print(f"PASS {what} rank={hvd.rank()}", flush=True)


def _reductions(lib, dt, n, r, size, xs):
    """allreduce: every op, the scale factors, in place, fused; reducescatter."""
    floating = dt.startswith("float") or dt == "bfloat16"
    total = sum(xs)
    avg = total / size if floating else _trunc_div(total, size)
    cases = [
        ("sum", {"op": hvd.Sum}, total),
        ("avg", {"op": hvd.Average}, avg),
        ("min", {"op": hvd.Min}, np.min(xs, axis=0)),
        ("max", {"op": hvd.Max}, np.max(xs, axis=0)),
    ]
    # Scale factors: each rank's share scaled (integers: truncated) before the sum, as upstream.
    shares = sum(x * 0.5 if floating else np.trunc(x * 0.5) for x in xs)
    cases.append(
        ("scaled", {"op": hvd.Sum, "prescale_factor": 0.5, "postscale_factor": 3.0}, shares * 3.0)
    )
    scaled_avg = shares / size if floating else _trunc_div(shares, size)
    cases.append(("avg.prescaled", {"op": hvd.Average, "prescale_factor": 0.5}, scaled_avg))
    tag = f"odd.{dt}.{n}"
    for name, kwargs, want in cases:
        out = hvd.allreduce(make(lib, xs[r], dt), name=f"{tag}.{name}", **kwargs)
        _check(lib, f"allreduce {name} {dt} n={n}", out, want, dt)
    ps = [_pattern(n, q, dt, small=True) for q in range(size)]
    out = hvd.allreduce(make(lib, ps[r], dt), op=hvd.Product, name=f"{tag}.prod")
    _check(lib, f"allreduce product {dt} n={n}", out, np.prod(ps, axis=0), dt)
    x = make(lib, xs[r], dt)
    out = hvd.allreduce(x, op=hvd.Average, out=x, name=f"{tag}.inplace")
    _check(lib, f"allreduce avg in place {dt} n={n}", out, avg, dt)
    outs = hvd.grouped_allreduce(
        [make(lib, xs[r], dt), make(lib, xs[r][:3], dt)], op=hvd.Average, name=f"{tag}.group"
    )
    _check(lib, f"grouped allreduce avg (fused) {dt} n={n}", outs[0], avg, dt)
    _check(lib, f"grouped allreduce avg, second member {dt} n={n}", outs[1], avg[:3], dt)
    rows = [n // size + (1 if q < n % size else 0) for q in range(size)]
    start = sum(rows[:r])
    for name, op, want in (("sum", hvd.Sum, total), ("avg", hvd.Average, avg)):
        out = hvd.reducescatter(make(lib, xs[r], dt), op=op, name=f"{tag}.rs.{name}")
        _check(lib, f"reducescatter {name} {dt} n={n}", out, want[start : start + rows[r]], dt)


def _moves(lib, dt, n, r, size, xs):
    """allgather, broadcast, alltoall: bytes moved, every one of them."""
    tag = f"odd.{dt}.{n}"
    out = hvd.allgather(make(lib, xs[r], dt), name=f"{tag}.gather")
    _check(lib, f"allgather {dt} n={n}", out, np.concatenate(xs), dt)
    for root in sorted({0, size - 1}):
        out = hvd.broadcast(make(lib, xs[r], dt), root, name=f"{tag}.bcast.{root}")
        _check(lib, f"broadcast root {root} {dt} n={n}", out, xs[root], dt)
    splits = [n // size + (1 if q < n % size else 0) for q in range(size)]
    start = sum(splits[:r])
    out, got_splits = hvd.alltoall(make(lib, xs[r], dt), splits=splits, name=f"{tag}.a2a")
    want = np.concatenate([x[start : start + splits[r]] for x in xs])
    _check(lib, f"alltoall {dt} n={n}", out, want, dt)
    assert list(got_splits) == [splits[r]] * size, got_splits


def run(lib, counts=COUNTS):
    """Every collective at each count, for every dtype `lib` has."""
    r, size = hvd.rank(), hvd.size()
    kinds, note = dtypes(lib)
    if note and r == 0:
        print(f"odd counts: {note}", flush=True)
    for dt in kinds:
        for n in counts:
            xs = [_pattern(n, q, dt) for q in range(size)]
            _reductions(lib, dt, n, r, size, xs)
            _moves(lib, dt, n, r, size, xs)
