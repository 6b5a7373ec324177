"""Adasum (op=hvd.Adasum, ops/adasum.cc) against the NumPy reference of its tree
(tests/support/reference.py's adasum), per tensor also when fused, and its refusals, each on
every rank (test_adasum.py)."""

import numpy as np

import horovod.numpy as hvd
from tests.engine.scenarios_join import check_last_joined
from tests.support.reference import BF16, adasum, check, make
from tests.support.scenario import expect_error

FLOATS = [np.dtype(t) for t in ("float16", "float32", "float64")] + ([BF16] if BF16 else [])
# 1 element, odd sizes the halving cuts unevenly, a size no rank count divides, 2-D.
SHAPES = [(1,), (2,), (7,), (1000,), (100003,), (5, 3)]


def _same_on_every_rank(got, what):
    rows = hvd.allgather(got.reshape(1, -1).view(np.uint8), name=f"{what}/same")
    assert all((row == rows[0]).all() for row in rows), f"{what}: ranks disagree"


def sc_adasum():
    r, n = hvd.rank(), hvd.size()
    cases = []
    for dt in FLOATS:
        for shape in SHAPES:
            name = f"ad/{dt.name}/{'x'.join(map(str, shape))}"
            h = hvd.allreduce_async(make(r, shape, dt), op=hvd.Adasum, name=name)
            cases.append((name, dt, shape, h))
    for name, dt, shape, h in cases:
        got = hvd.synchronize(h)
        check(got, adasum([make(q, shape, dt) for q in range(n)], dt), dt, name)
        _same_on_every_rank(got, name)
    # The tree's fixed points: equal vectors give the vector; a rank's zero vector adds nothing
    # (n = 2: the other rank's vector comes back unchanged); orthogonal vectors add.
    same = np.linspace(-1, 1, 11)
    assert np.allclose(hvd.allreduce(same, op=hvd.Adasum, name="ad/equal"), same, atol=1e-15)
    x = np.zeros(5) if r == 0 else np.arange(5.0) * r
    got = hvd.allreduce(x, op=hvd.Adasum, name="ad/zero")
    check(
        got,
        adasum([np.zeros(5)] + [np.arange(5.0) * q for q in range(1, n)], x.dtype),
        x.dtype,
        "zero",
    )
    if n == 2:
        assert (got == np.arange(5.0)).all(), got
    basis = np.eye(n)[r] * (r + 1)
    got = hvd.allreduce(basis, op=hvd.Adasum, name="ad/orthogonal")
    assert np.allclose(got, np.arange(1.0, n + 1)), got


def sc_adasum_fused():
    """Tensors fused into one buffer are combined each as a vector of its own: their scales
    differ by orders of magnitude across tensors and ranks, so dot products taken over the
    fused buffer would give other coefficients. Grouped (one negotiation) and separate async
    ops (fused by the engine) alike; a 1-element and an empty tensor among them."""
    r, n = hvd.rank(), hvd.size()
    shapes = [(1,), (0,), (33,), (4, 5), (1001,), (2,)]
    scales = [1.0, 1.0, 1000.0, 1e-3, 1.0, 50.0]

    def tensor(q, i, dt):
        return (make(q, shapes[i], dt, salt=i).astype(np.float64) * scales[i] * (q + 1)).astype(dt)

    for dt in (np.dtype(np.float32), np.dtype(np.float64)):
        grouped = hvd.grouped_allreduce(
            [tensor(r, i, dt) for i in range(len(shapes))], op=hvd.Adasum, name=f"adf/{dt.name}"
        )
        handles = [
            hvd.allreduce_async(tensor(r, i, dt), op=hvd.Adasum, name=f"adf/{dt.name}/{i}")
            for i in range(len(shapes))
        ]
        separate = [hvd.synchronize(h) for h in handles]
        for i in range(len(shapes)):
            want = adasum([tensor(q, i, dt) for q in range(n)], dt)
            check(grouped[i], want, dt, f"grouped {dt} {i}")
            check(separate[i], want, dt, f"separate {dt} {i}")


def sc_adasum_scaled():
    """Prescale and postscale apply as for Sum: before and after the combination."""
    r, n = hvd.rank(), hvd.size()
    for dt in FLOATS:
        x = make(r, (257,), dt)
        got = hvd.allreduce(
            x, op=hvd.Adasum, name=f"ads/{dt.name}", prescale_factor=0.5, postscale_factor=3.0
        )
        pre = [(make(q, (257,), dt).astype(np.float64) * 0.5).astype(dt) for q in range(n)]
        check(got, adasum(pre, dt) * 3.0, dt, f"scaled {dt}")


def sc_adasum_refused():
    """Integer and bool dtypes, and reducescatter, fail on every rank, named; the engine goes on."""
    for dt in ("int32", "int64", "uint8", "bool"):
        nm = f"adr/{dt}"
        expect_error(
            lambda: hvd.allreduce(np.ones(4, dt), op=hvd.Adasum, name=nm),
            ValueError,
            f"tensor '{nm}'",
            f"allreduce with Adasum of {dt} is not supported",
            "floating-point dtype",
        )
    expect_error(
        lambda: hvd.reducescatter(np.ones(4, np.float32), op=hvd.Adasum, name="adr/rs"),
        ValueError,
        "tensor 'adr/rs'",
        "reducescatter with Adasum is not supported",
    )
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="adr/after") == hvd.size()).all()


def sc_adasum_not_power_of_two():
    """3 ranks: every rank fails naming the tensor and the rank count, also in a group; the
    engine goes on."""
    n = hvd.size()
    for nm, fn in (
        ("adp/one", lambda: hvd.allreduce(np.ones(4), op=hvd.Adasum, name="adp/one")),
        (
            "adp/group",
            lambda: hvd.grouped_allreduce(
                [np.ones(2), np.ones(3)], op=hvd.Adasum, name="adp/group"
            ),
        ),
    ):
        expect_error(
            fn, ValueError, f"tensor '{nm}", f"power-of-two number of ranks, this job has {n}"
        )
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="adp/after") == n).all()


def sc_adasum_join():
    """While rank 0 has joined, the others' Adasum allreduce takes its zeros, which the
    combination leaves out (a zero vector's coefficient is 1): the result is the Adasum tree
    with a zero vector in rank 0's place."""
    r, n = hvd.rank(), hvd.size()
    if r == 0:
        check_last_joined(hvd.join())
        return
    for dt in (np.dtype(np.float32), np.dtype(np.float64)):
        got = hvd.allreduce(make(r, (9,), dt), op=hvd.Adasum, name=f"adj/{dt.name}")
        inputs = [np.zeros(9, dt)] + [make(q, (9,), dt) for q in range(1, n)]
        check(got, adasum(inputs, dt), dt, f"join {dt}")
    check_last_joined(hvd.join())
