"""Second and third derivatives through horovod.torch's collectives: `mpirun -np N python
tests/torch/scenarios_second_order.py NAME[,NAME...]` (the protocol of tests/support/scenario.py).

Each rank's loss is sum(w * op(x)**3) (w, x and the directions drawn from seeds per rank, so every
rank rebuilds every rank's), differentiated with create_graph=True, then (grad * v).sum() is
differentiated, then (that * u).sum(). The reference is one process on every rank's inputs: the
sum of the ranks' losses through the op written with plain torch, each pass's gradient times the
op's factor c (the gradients' convention: 1 for allreduce and alltoall, 1/n for allgather and
broadcast, which average, n for reducescatter, as upstream). Every pass of the ranks applies the
op's gradient once, so each pass of the reference multiplies by c once."""

import sys

import torch

import horovod.torch as hvd
from tests.support import scenario

torch.set_num_threads(1)
ORDERS = 3
_NAMES = {hvd.Sum: "Sum", hvd.Average: "Average"}


def _t(q, shape, salt):
    g = torch.Generator().manual_seed(1000 * q + salt)
    return torch.randn(shape, generator=g, dtype=torch.float64)


def _passes(inputs, outputs, c=1.0, orders=ORDERS):
    """[first, second, third] derivatives, each a list with one tensor per input; inputs and
    outputs: [(rank, index, tensor)], the weights and directions drawn from (rank, index)."""
    s = sum((_t(q, y.shape, 100 + i) * y**3).sum() for q, i, y in outputs)
    xs = [x for _, _, x in inputs]
    found = []
    for k in range(orders):
        gs = torch.autograd.grad(s, xs, create_graph=k < orders - 1, materialize_grads=True)
        gs = [g * c for g in gs] if c != 1.0 else list(gs)
        found.append(gs)
        s = sum((g * _t(q, g.shape, 200 + 10 * k + i)).sum() for g, (q, i, _) in zip(gs, inputs))
    return found


def _check(make, op, ref, c, what):
    """op(xs) on this rank (its inputs -> its outputs) against ref(every rank's inputs) -> every
    rank's outputs, in one process."""
    r, n = hvd.rank(), hvd.size()
    xs = [t.requires_grad_() for t in make(r)]
    outs = op(xs)
    got = _passes([(r, i, x) for i, x in enumerate(xs)], [(r, i, y) for i, y in enumerate(outs)])
    every = [[t.requires_grad_() for t in make(q)] for q in range(n)]
    want_outs = ref(every)
    for y, w in zip(outs, want_outs[r]):
        assert torch.allclose(y, w, rtol=1e-10, atol=1e-10), (what, "output", y, w)
    want = _passes(
        [(q, i, x) for q in range(n) for i, x in enumerate(every[q])],
        [(q, i, y) for q in range(n) for i, y in enumerate(want_outs[q])],
        c,
    )
    mine = [i for i, (q, _) in enumerate((q, x) for q in range(n) for x in every[q]) if q == r]
    for k in range(ORDERS):
        for g, j in zip(got[k], mine):
            w = want[k][j]
            assert g.shape == w.shape, (what, k + 1, g.shape, w.shape)
            assert torch.allclose(g, w, rtol=1e-9, atol=1e-9), (what, f"order {k + 1}", g, w)
    return got


def _blocks(total, n):
    """Reducescatter's rows per rank: the first ranks get one more where they do not divide."""
    return [total // n + (1 if q < total % n else 0) for q in range(n)]


def _scatter(ys, n, scale):
    """Every rank's reducescatter output from the ranks' inputs `ys`: its block of their sum."""
    return list(torch.split(sum(ys) * scale, _blocks(ys[0].shape[0], n)))


def sc_allreduce():
    n = hvd.size()
    make = lambda q: [_t(q, (3, 2), 1)]  # noqa: E731
    for op, pre, post, scale in (
        (hvd.Sum, 2.0, 0.5, 1.0),
        (hvd.Average, 0.5, 3.0, 1.0 / n),
    ):
        _check(
            make,
            lambda xs, op=op, pre=pre, post=post: [
                hvd.allreduce(xs[0], op=op, prescale_factor=pre, postscale_factor=post)
            ],
            lambda every, pre=pre, post=post, s=scale: (
                [[sum(e[0] for e in every) * (pre * post * s)]] * n
            ),
            1.0,
            f"allreduce {_NAMES[op]}",
        )
    _check(
        lambda q: [_t(q, (3,), 2), _t(q, (2, 2), 3)],
        lambda xs: hvd.grouped_allreduce(xs, op=hvd.Sum),
        lambda every: [[sum(e[i] for e in every) for i in range(2)]] * n,
        1.0,
        "grouped_allreduce",
    )


def sc_broadcast():
    n = hvd.size()
    root = n - 1
    _check(
        lambda q: [_t(q, (2, 3), 1)],
        lambda xs: [hvd.broadcast(xs[0], root_rank=root, name="so.bc")],
        lambda every: [[every[root][0] * 1.0]] * n,
        1.0 / n,
        "broadcast",
    )


def sc_allgather():
    """Uneven: rank q gives q + 1 rows."""
    n = hvd.size()
    _check(
        lambda q: [_t(q, (q + 1, 2), 1)],
        lambda xs: [hvd.allgather(xs[0], name="so.ag")],
        lambda every: [[torch.cat([e[0] for e in every])]] * n,
        1.0 / n,
        "allgather",
    )


def sc_grouped_allgather():
    n = hvd.size()
    _check(
        lambda q: [_t(q, (q + 1, 2), 1), _t(q, (q + 2,), 2)],
        lambda xs: hvd.grouped_allgather(xs, name="so.gag"),
        lambda every: [[torch.cat([e[i] for e in every]) for i in range(2)]] * n,
        1.0 / n,
        "grouped_allgather",
    )


def sc_alltoall():
    n = hvd.size()

    def ref(every):  # rank r gets block r (2 rows) of every rank's tensor
        return [[torch.cat([e[0][2 * r : 2 * r + 2] for e in every])] for r in range(n)]

    _check(
        lambda q: [_t(q, (2 * n, 3), 1)],
        lambda xs: [hvd.alltoall(xs[0], name="so.a2a")],
        ref,
        1.0,
        "alltoall",
    )


def _splits(q, n):
    """Rank q sends splits[r] rows to rank r (some none; not what it receives)."""
    return [(q + 2 * r) % 3 for r in range(n)]


def sc_alltoall_splits():
    r, n = hvd.rank(), hvd.size()

    def ref(every):
        parts = [torch.split(e[0], _splits(q, n)) for q, e in enumerate(every)]
        return [[torch.cat([p[d] for p in parts])] for d in range(n)]

    def op(xs):
        out, received = hvd.alltoall(xs[0], splits=torch.tensor(_splits(r, n)), name="so.a2as")
        assert received.tolist() == [_splits(q, n)[r] for q in range(n)], received
        return [out]

    _check(lambda q: [_t(q, (sum(_splits(q, n)), 2), 1)], op, ref, 1.0, "alltoall splits")


def sc_reducescatter():
    """2n + 1 rows: rank 0 gets one more."""
    n = hvd.size()
    for op, pre, post, scale in (
        (hvd.Sum, 2.0, 0.5, 1.0),
        (hvd.Average, 0.5, 3.0, 1.0 / n),
    ):
        _check(
            lambda q: [_t(q, (2 * n + 1, 2), 1)],
            lambda xs, op=op, pre=pre, post=post: [
                hvd.reducescatter(xs[0], op=op, prescale_factor=pre, postscale_factor=post)
            ],
            lambda every, s=pre * post * scale: [
                list(b) for b in zip(_scatter([e[0] for e in every], n, s))
            ],
            float(n),
            f"reducescatter {_NAMES[op]}",
        )


def sc_grouped_reducescatter():
    n = hvd.size()
    for op, scale in ((hvd.Sum, 1.0), (hvd.Average, 1.0 / n)):

        def ref(every, s=scale):
            per_tensor = [_scatter([e[i] for e in every], n, s) for i in range(2)]
            return [list(b) for b in zip(*per_tensor)]

        _check(
            lambda q: [_t(q, (2 * n + 1, 2), 1), _t(q, (n,), 2)],
            lambda xs, op=op: hvd.grouped_reducescatter(xs, op=op),
            ref,
            float(n),
            f"grouped_reducescatter {_NAMES[op]}",
        )


# ---- compiled -----------------------------------------------------------------------------
# torch refuses double backward through a compiled graph's backward ("torch.compile with
# aot_autograd does not currently support double backward"), so the compiled forms compute every
# derivative inside the one compiled function, torch.autograd.grad traced into the graph
# (trace_autograd_ops). (torch.func.grad refuses any custom op with register_autograd: its
# autograd.Function has no setup_context.) Every rank compiles the same graph (the same shapes),
# so the collectives run in the same order.


def _inside(op, dirs):
    def passes(x, w):
        s = (w * op(x) ** 3).sum()
        found = []
        for d in dirs:
            (g,) = torch.autograd.grad(s, x, create_graph=True)
            found.append(g.detach())  # its graph is spent by the next pass
            s = (g * d).sum()
        return [*found, torch.autograd.grad(s, x)[0]]

    return passes


def _compiled_check(op, shape, what):
    """The eager derivatives (checked against the reference by the eager scenarios) again from
    one compiled function."""
    r = hvd.rank()
    x = _t(r, shape, 1).requires_grad_()
    y = op(x)
    w = _t(r, y.shape, 100)
    dirs = [_t(r, shape, 200 + 10 * k) for k in range(ORDERS - 1)]
    want = _passes([(r, 0, x)], [(r, 0, y)])
    torch._dynamo.reset()
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        got = torch.compile(_inside(op, dirs), backend="aot_eager", fullgraph=True)(x, w)
    for k, g in enumerate(got):
        assert torch.allclose(g, want[k][0], rtol=1e-9, atol=1e-9), (what, k + 1, g, want[k])


def sc_compiled():
    n = hvd.size()
    _compiled_check(lambda x: hvd.allgather(x, name="so.c.ag"), (2, 3), "allgather")
    _compiled_check(
        lambda x: hvd.reducescatter(x, op=hvd.Sum, prescale_factor=2.0, name="so.c.rs"),
        (2 * n, 3),
        "reducescatter",
    )
    _compiled_check(lambda x: hvd.alltoall(x, name="so.c.a2a"), (2 * n, 3), "alltoall")
    _compiled_check(lambda x: hvd.allreduce(x, op=hvd.Sum, name="so.c.ar"), (2, 3), "allreduce")
    _compiled_check(lambda x: hvd.broadcast(x, 0, name="so.c.bc"), (2, 3), "broadcast")


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
