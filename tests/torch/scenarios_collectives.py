"""horovod.torch's collectives (scenarios.py runs them): every dtype and form of each op,
gradients through them, process sets and bad input, each checked against what every rank can
compute itself (tests/support/reference.py)."""

import torch

import horovod.torch as hvd
from tests.support.reference import ops, reference
from tests.support.reference_torch import DTYPES, check, make
from tests.support.scenario import expect_error

torch.set_num_threads(1)
OPS = ops(hvd)


def sc_allreduce():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        xs, exact = zip(*[make(q, (3, 5), dt) for q in range(n)])
        for op in ("sum", "min", "max"):
            x = xs[r].clone()
            got = hvd.allreduce(x, op=OPS[op], name=f"ar.{dt}.{op}")
            check(got, reference(exact, op, dt), dt, f"allreduce {dt} {op}")
            assert torch.equal(x, xs[r]), f"allreduce {dt} {op}: input changed"
        if dt.is_floating_point:
            got = hvd.allreduce(xs[r].clone())  # unnamed, Average
            check(got, reference(exact, "average", dt), dt, f"average {dt}")
    x = torch.ones(4)
    y = hvd.allreduce_(x, op=hvd.Sum, name="ar.inplace")
    assert y is x and torch.equal(x, torch.full((4,), float(n))), x
    t = torch.arange(6.0).reshape(2, 3).t()  # not contiguous: the result is copied back
    assert hvd.allreduce_(t, op=hvd.Sum, name="ar.strided") is t
    assert torch.equal(t, torch.arange(6.0).reshape(2, 3).t() * n), t
    h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="ar.async")
    while not hvd.poll(h):
        pass
    assert torch.equal(hvd.synchronize(h), torch.full((3,), float(n)))
    got = hvd.allreduce(
        torch.ones(2), average=False, prescale_factor=2.0, postscale_factor=0.5, name="ar.scaled"
    )
    assert torch.equal(got, torch.full((2,), float(n))), got
    expect_error(lambda: hvd.allreduce(torch.ones(1), average=True, op=hvd.Sum), ValueError, "op")
    got = hvd.allreduce(torch.full((3,), 1.5), op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got.dtype == torch.float32 and torch.equal(got, torch.full((3,), 1.5 * n)), got
    b = torch.tensor([r % 2 == 0, True])
    assert hvd.allgather(b, name="ar.bool").dtype == torch.bool


def sc_grouped():
    r, n = hvd.rank(), hvd.size()
    xs = [torch.full((k + 1,), float(r)) for k in range(4)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="gr")
    for k, o in enumerate(outs):
        assert torch.equal(o, torch.full((k + 1,), n * (n - 1) / 2)), o
    ys = [torch.ones(3), torch.ones(2, 2)]
    assert hvd.grouped_allreduce_(ys, op=hvd.Sum, name="gr.inplace") == ys
    assert all(torch.equal(y, torch.full_like(y, n)) for y in ys), ys
    parts = hvd.grouped_allgather([torch.full((r + 1,), r), torch.ones(1)], name="gr.ag")
    assert parts[0].tolist() == [q for q in range(n) for _ in range(q + 1)], parts
    assert parts[1].tolist() == [1.0] * n
    rs = hvd.grouped_reducescatter([torch.ones(n, 2), torch.ones(n)], op=hvd.Sum, name="gr.rs")
    assert torch.equal(rs[0], torch.full((1, 2), float(n))) and rs[1].tolist() == [n], rs


def sc_collectives():
    r, n = hvd.rank(), hvd.size()
    got = hvd.allgather(torch.full((r + 1, 2), r, dtype=torch.int64), name="c.ag")
    assert got[:, 0].tolist() == [q for q in range(n) for _ in range(q + 1)], got
    got = hvd.broadcast(torch.full((3,), float(r)), root_rank=n - 1, name="c.bc")
    assert torch.equal(got, torch.full((3,), float(n - 1))), got
    p = torch.nn.Parameter(torch.full((2, 2), float(r)))
    assert hvd.broadcast_(p, root_rank=0, name="c.bc_") is p and torch.equal(
        p.data, torch.zeros(2, 2)
    )
    out = hvd.alltoall(torch.arange(n, dtype=torch.float32) + 10 * r, name="c.a2a")
    assert out.tolist() == [10.0 * q + r for q in range(n)], out  # no splits: the tensor alone
    h = hvd.alltoall_async(torch.arange(n, dtype=torch.float32), name="c.a2a.async")
    out, received = hvd.synchronize(h)  # the async form keeps both, as upstream's
    assert received.tolist() == [1] * n, received
    splits = torch.tensor([2] + [0] * (n - 1))
    out, received = hvd.alltoall(torch.full((2, 3), float(r)), splits=splits, name="c.a2a.s")
    assert out.shape == ((2 * n, 3) if r == 0 else (0, 3)), out.shape
    # Received splits come back like the splits tensor given (upstream: on its device, in its
    # dtype); given a list, as int64 on the CPU.
    assert received.dtype == torch.int64 and received.tolist() == ([2] * n if r == 0 else [0] * n)
    h = hvd.alltoall_async(torch.ones(n, 2), splits=torch.ones(n, dtype=torch.int32), name="c.i32")
    assert hvd.synchronize(h)[1].dtype == torch.int32
    out, received = hvd.alltoall(torch.ones(n), splits=[1] * n, name="c.a2a.list")
    assert received.dtype == torch.int64 and received.tolist() == [1] * n, received
    got = hvd.reducescatter(torch.ones(n * 2, 3), op=hvd.Sum, name="c.rs")
    assert torch.equal(got, torch.full((2, 3), float(n))), got
    got = hvd.reducescatter(torch.ones(n), name="c.rs.avg")  # Average, as upstream
    assert got.tolist() == [1.0], got
    hvd.barrier()
    assert hvd.broadcast_object({"r": r} if r == 0 else None, 0) == {"r": 0}
    assert hvd.allgather_object(torch.tensor([r])) == [torch.tensor([q]) for q in range(n)]


def sc_autograd():
    r, n = hvd.rank(), hvd.size()
    x = torch.full((3,), float(r + 1), requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum, name="g.ar").sum().backward()
    assert torch.equal(x.grad, torch.full((3,), float(n))), x.grad  # the sum of ones
    x = torch.full((r + 1, 2), 1.0, requires_grad=True)
    (hvd.allgather(x, name="g.ag") * 2).sum().backward()
    assert torch.equal(x.grad, torch.full((r + 1, 2), 2.0)), x.grad  # averaged: 2
    x = torch.ones(2, requires_grad=True)
    hvd.broadcast(x, root_rank=0, name="g.bc").sum().backward()
    assert torch.equal(x.grad, torch.ones(2) if r == 0 else torch.zeros(2)), x.grad
    x = torch.ones(n, 2, requires_grad=True)
    out = hvd.alltoall(x * (r + 1), name="g.a2a")  # without splits: the tensor alone
    out.sum().backward()
    assert torch.equal(x.grad, torch.full((n, 2), float(r + 1))), x.grad
    x = torch.ones(n, 2, requires_grad=True)
    hvd.reducescatter(x, op=hvd.Sum, name="g.rs").sum().backward()
    assert torch.equal(x.grad, torch.full((n, 2), float(n))), x.grad  # upstream's: n for Sum
    x = torch.ones(n, 2, requires_grad=True)
    hvd.reducescatter(x, op=hvd.Average, name="g.rs.avg", postscale_factor=3.0).sum().backward()
    assert torch.equal(x.grad, torch.full((n, 2), 3.0)), x.grad  # upstream's: no 1/n for Average
    xs = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    sum(o.sum() for o in hvd.grouped_allreduce(xs, op=hvd.Average, name="g.gr")).backward()
    assert all(torch.equal(x.grad, torch.ones_like(x)) for x in xs), [x.grad for x in xs]
    # The grouped allgather and reducescatter: each member's gradient as its single form's.
    xs = [torch.ones(r + 1, 2, requires_grad=True), torch.ones(r + 2, requires_grad=True)]
    outs = hvd.grouped_allgather(xs, name="g.gag")
    assert [o.shape[0] for o in outs] == [n * (n + 1) // 2, n * (n + 3) // 2], outs
    (outs[0].sum() * 2 + outs[1].sum() * 3).backward()
    assert torch.equal(xs[0].grad, torch.full((r + 1, 2), 2.0)), xs[0].grad
    assert torch.equal(xs[1].grad, torch.full((r + 2,), 3.0)), xs[1].grad
    xs = [torch.ones(n, 2, requires_grad=True), torch.ones(2 * n, requires_grad=True)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum, name="g.grs")
    assert torch.equal(outs[1], torch.full((2,), float(n))), outs
    (outs[0].sum() + outs[1].sum() * 5).backward()
    assert torch.equal(xs[0].grad, torch.full((n, 2), float(n))), xs[0].grad
    assert torch.equal(xs[1].grad, torch.full((2 * n,), 5.0 * n)), xs[1].grad


def sc_process_set():
    n = hvd.size()
    firsts = hvd.add_process_set(list(range(n - 1)))
    try:
        if firsts.included():
            got = hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=firsts, name="ps.ar")
            assert torch.equal(got, torch.full((2,), float(n - 1))), got
        hvd.barrier()
    finally:
        hvd.remove_process_set(firsts)


def sc_errors():
    r, n = hvd.rank(), hvd.size()
    bad = [1.0, 2.0] if r == n - 1 else torch.ones(2)  # one rank's bad input fails every rank
    expect_error(lambda: hvd.allreduce(bad, name="e.input"), (TypeError, ValueError), "e.input")
    x = torch.ones(r + 1)  # shapes differ: every rank names the tensor
    expect_error(lambda: hvd.allreduce(x, name="e.shape"), Exception, "e.shape")
    # An op every rank refuses is a ValueError, and a RuntimeError as upstream's torch frontend
    # raises it (its tests catch RuntimeError): Adasum has no meaning for reducescatter.
    for cls in (ValueError, RuntimeError):
        expect_error(
            lambda: hvd.reducescatter(torch.ones(n, 2), op=hvd.Adasum, name="e.adasum"),
            cls,
            "e.adasum",
        )
    # While rank 0 has joined, an allgather fails on the others, named (a RuntimeError too, as
    # upstream's join tests expect); join() then gives every rank the same last rank.
    if r == 0:
        last = hvd.join()
    else:
        expect_error(
            lambda: hvd.allgather(torch.ones(1), name="e.joined"), RuntimeError, "e.joined", "[0]"
        )
        last = hvd.join()
    assert last != 0 and hvd.allgather_object(last) == [last] * n, last
    assert torch.equal(
        hvd.allreduce(torch.ones(1), op=hvd.Sum, name="e.after"), torch.full((1,), float(n))
    )
