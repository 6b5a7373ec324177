"""horovod.torch's scenarios: `mpirun -np N python tests/torch/scenarios.py NAME[,NAME...]`,
each checked against what every rank can compute itself (the protocol of
tests/support/scenario.py)."""

import sys
import warnings

import numpy as np
import torch

import horovod.torch as hvd
from tests.engine.reference import adasum
from tests.support import scenario
from tests.support.scenario import expect_error

torch.set_num_threads(1)
DTYPES = [
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]


def _data(r, shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * r + salt)
    x = torch.randint(0, 5, shape, generator=g)
    return x.to(dtype)


def _same(got, want, what):
    assert isinstance(got, torch.Tensor), (what, type(got))
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    tol = 1e-2 if want.dtype in (torch.float16, torch.bfloat16) else 1e-6
    assert torch.allclose(got.double(), want.double(), atol=tol), (what, got, want)


def sc_allreduce():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        xs = [_data(q, (3, 5), dt) for q in range(n)]
        for op, ref in (
            (hvd.Sum, sum),
            (hvd.Min, lambda v: torch.stack(v).amin(0)),
            (hvd.Max, lambda v: torch.stack(v).amax(0)),
        ):
            want = ref([x.double() for x in xs]).to(dt)
            x = xs[r].clone()
            _same(hvd.allreduce(x, op=op, name=f"ar.{dt}.{op}"), want, f"allreduce {dt} {op}")
            _same(x, xs[r], "input untouched")
        if dt.is_floating_point:
            want = (sum(x.double() for x in xs) / n).to(dt)
            _same(hvd.allreduce(xs[r].clone()), want, f"average {dt}")  # unnamed, Average
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


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _batch(r, rows=4):
    g = torch.Generator().manual_seed(7 + r)
    return torch.randn(rows, 6, generator=g), torch.randn(rows, 2, generator=g)


def _reference(n, steps, opt_fn, passes=1):
    """One process on every rank's data: what the distributed model must equal (Average)."""
    model = _model()
    opt = opt_fn(model.parameters())
    for step in range(steps):
        opt.zero_grad()
        for k in range(passes):
            loss = (
                sum(
                    torch.nn.functional.mse_loss(model(x), y)
                    for x, y in (_batch(q + 100 * (step * passes + k)) for q in range(n))
                )
                / n
            )
            loss.backward()
        opt.step()
    return model


def _train(opt_fn, steps=3, passes=1, **options):
    r = hvd.rank()
    model = _model(seed=r)  # different on purpose: the broadcast makes them equal
    opt = hvd.DistributedOptimizer(
        opt_fn(model.parameters()),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=passes,
        **options,
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    torch.manual_seed(0)
    assert torch.equal(model[0].weight, _model()[0].weight)
    for step in range(steps):
        opt.zero_grad()
        for k in range(passes):
            x, y = _batch(r + 100 * (step * passes + k))
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model, opt


def _close(model, want, tol=1e-5):
    for a, b in zip(model.parameters(), want.parameters()):
        assert torch.allclose(a, b, atol=tol), (a, b)


def sc_optimizer():
    n = hvd.size()
    sgd = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    model, opt = _train(sgd)
    names = opt._parameter_names  # upstream's attribute: {parameter: name}, unique names
    assert len(set(names.values())) == len(names) == len(list(model.parameters())), names
    _close(model, _reference(n, 3, sgd))
    adam = lambda p: torch.optim.Adam(p, lr=0.01)  # noqa: E731
    model, _ = _train(adam, groups=2)
    _close(model, _reference(n, 3, adam))
    model, _ = _train(sgd, passes=2)  # accumulated locally over 2 passes, then reduced
    _close(model, _reference(n, 3, sgd, passes=2))
    model, _ = _train(sgd, gradient_predivide_factor=2.0)
    _close(model, _reference(n, 3, sgd))
    model, _ = _train(sgd, compression=hvd.Compression.fp16)
    _close(model, _reference(n, 3, sgd), tol=1e-2)
    # Overlap: the gradients are submitted during backward(), before step() waits for them.
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    torch.nn.functional.mse_loss(model(_batch(hvd.rank())[0]), _batch(0)[1]).backward()
    assert len(opt._handles) == 4, opt._handles
    expect_error(
        opt.zero_grad, AssertionError, "before optimizer.step() or optimizer.synchronize()"
    )
    opt.synchronize()  # gradient clipping between synchronize() and step()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    with opt.skip_synchronize():
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.zero_grad()


def _adasum_reference(members, steps, opt_fn, passes=1):
    """Upstream's delta optimizer on one process: each member steps its own copy of the model
    from the shared parameters with its own optimizer (its own momentum); the shared
    parameters move by the Adasum of the members' deltas, tensor by tensor (the engine tests'
    NumPy reference, as the TensorFlow Adasum scenarios use it)."""
    shared = [p.detach().clone() for p in _model().parameters()]
    copies = []
    for q in members:
        m = _model()
        copies.append((q, m, opt_fn(m.parameters())))
    for step in range(steps):
        deltas = []
        for q, m, opt in copies:
            with torch.no_grad():
                for p, s in zip(m.parameters(), shared):
                    p.copy_(s)
            opt.zero_grad()
            for k in range(passes):
                x, y = _batch(q + 100 * (step * passes + k))
                torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
            deltas.append([p.detach() - s for p, s in zip(m.parameters(), shared)])
        shared = [
            s + torch.from_numpy(adasum([a.numpy(), b.numpy()], np.float32)).to(s.dtype)
            for s, a, b in zip(shared, *deltas)
        ]
    return shared


def sc_adasum_optimizer():
    """op=hvd.Adasum: upstream's delta optimizer, on ranks 0 and 1 (a process set at np 3);
    at np 3 on every rank, the error of a rank count that is not a power of two."""
    r, n = hvd.rank(), hvd.size()
    pair = hvd.add_process_set([0, 1]) if n > 2 else hvd.global_process_set
    sgd = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    adam = lambda p: torch.optim.Adam(p, lr=0.01)  # noqa: E731
    try:
        if r < 2:
            for opt_fn, passes in ((sgd, 1), (sgd, 2), (adam, 1)):
                model = _model()
                opt = hvd.DistributedOptimizer(
                    opt_fn(model.parameters()),
                    named_parameters=model.named_parameters(),
                    op=hvd.Adasum,
                    backward_passes_per_step=passes,
                    process_set=pair,
                )
                for step in range(3):
                    opt.zero_grad()
                    for k in range(passes):
                        x, y = _batch(r + 100 * (step * passes + k))
                        torch.nn.functional.mse_loss(model(x), y).backward()
                    assert len(opt._handles) == 4, opt._handles  # submitted during backward
                    if step == 0:
                        expect_error(opt.zero_grad, AssertionError, "before optimizer.step()")
                    opt.step()
                want = _adasum_reference([0, 1], 3, opt_fn, passes)
                for got, w in zip(model.parameters(), want):
                    assert torch.allclose(got, w, atol=1e-5), (got, w)
            expect_error(lambda: opt.skip_synchronize().__enter__(), AssertionError, "Adasum")
        hvd.barrier()
    finally:
        if n > 2:
            hvd.remove_process_set(pair)
    if n == 3:
        model = _model()
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            named_parameters=model.named_parameters(),
            op=hvd.Adasum,
        )
        x, y = _batch(r)
        torch.nn.functional.mse_loss(model(x), y).backward()
        expect_error(opt.step, ValueError, "power-of-two", "grad.")


def sc_optimizer_state():
    r = hvd.rank()
    for make in (
        lambda p: torch.optim.SGD(p, lr=0.1 * (r + 1), momentum=0.9),
        lambda p: torch.optim.Adam(p, lr=0.01 * (r + 1)),
        lambda p: torch.optim.LBFGS(p, lr=0.5 * (r + 1)),
    ):
        model = _model(seed=r)
        opt = make(model.parameters())
        if not isinstance(opt, torch.optim.LBFGS):
            torch.nn.functional.mse_loss(model(_batch(r)[0]), _batch(r)[1]).backward()
            opt.step()
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        states = hvd.allgather_object(
            {
                k: ({s: v.tolist() if torch.is_tensor(v) else v for s, v in st.items()})
                for k, st in opt.state_dict()["state"].items()
            }
        )
        assert all(s == states[0] for s in states), states
        lrs = hvd.allgather_object(opt.param_groups[0]["lr"])
        assert len(set(lrs)) == 1, lrs
    # Before the first step, as upstream leaves them: zero gradients on the trainable
    # parameters (none on the others), which a program may broadcast next.
    model = _model(seed=r)
    frozen = next(model.parameters())
    frozen.requires_grad_(False)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        named_parameters=model.named_parameters(),
    )
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert frozen.grad is None
    trained = [p for p in model.parameters() if p.requires_grad]
    assert trained and all(torch.equal(p.grad, torch.zeros_like(p)) for p in trained)
    assert torch.equal(hvd.broadcast(trained[0].grad, 0, name="os.grad"), trained[0].grad)
    # Upstream's third parameter, `model`, given positionally: it names the sparse embeddings,
    # whose zero gradients an SGD gets sparse (the others' stay dense).
    emb, lin = torch.nn.Embedding(5, 3, sparse=True), torch.nn.Linear(3, 1)
    model = torch.nn.Sequential(emb, lin)
    hvd.broadcast_optimizer_state(torch.optim.SGD(model.parameters(), lr=0.1), 0, model)
    assert emb.weight.grad.is_sparse and not lin.weight.grad.is_sparse


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


def sc_sparse():
    r, n = hvd.rank(), hvd.size()
    emb = torch.nn.Embedding(5, 2, sparse=True)
    hvd.broadcast_parameters(emb.state_dict(), 0)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(emb.parameters(), lr=1.0), named_parameters=emb.named_parameters()
    )
    before = emb.weight.detach().clone()
    emb(torch.tensor([r % 5])).sum().backward()
    opt.step()
    moved = (emb.weight.detach() != before).any(1).nonzero().flatten().tolist()
    assert moved == sorted({q % 5 for q in range(n)}), moved
    assert torch.allclose(
        before - emb.weight.detach(),
        torch.stack(
            [torch.full((2,), sum(1 for q in range(n) if q % 5 == i) / n) for i in range(5)]
        ),
    )
    # sparse_as_dense: sent dense, handed back sparse (SparseAdam refuses dense gradients).
    emb = torch.nn.Embedding(5, 2, sparse=True)
    hvd.broadcast_parameters(emb.state_dict(), 0)
    opt = hvd.DistributedOptimizer(
        torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
        named_parameters=emb.named_parameters(),
        sparse_as_dense=True,
    )
    emb(torch.tensor([r % 5])).sum().backward()
    opt.step()
    assert emb.weight.grad.is_sparse
    want = torch.stack(
        [torch.full((2,), sum(1 for q in range(n) if q % 5 == i) / n) for i in range(5)]
    )
    assert torch.allclose(emb.weight.grad.to_dense(), want), emb.weight.grad
    # The async form's handle, called as upstream's is (or synchronized): the summed rows.
    t = torch.sparse_coo_tensor([[r % 3]], [1.0], (3,))
    got = hvd.sparse_allreduce_async(t, name="s.call", op=hvd.Sum)()
    want = torch.tensor([sum(1.0 for q in range(n) if q % 3 == i) for i in range(3)])
    assert torch.equal(got.to_dense(), want), got


def sc_sync_batch_norm():
    # Unequal batches (rank r has r + 2 rows): outputs, input gradients and the summed weight
    # gradients equal one BatchNorm over every rank's rows at once.
    r, n = hvd.rank(), hvd.size()
    rows = [q + 2 for q in range(n)]
    xs = [
        torch.randn(k, 3, 4, generator=torch.Generator().manual_seed(q)) for q, k in enumerate(rows)
    ]
    coeff = torch.randn(sum(rows), 3, 4, generator=torch.Generator().manual_seed(99))
    start = sum(rows[:r])
    bn = hvd.SyncBatchNorm(3, momentum=0.3)
    x = xs[r].clone().requires_grad_(True)
    y = bn(x)
    (y * coeff[start : start + rows[r]]).sum().backward()
    ref = torch.nn.BatchNorm1d(3, momentum=0.3)
    xr = torch.cat(xs).requires_grad_(True)
    yr = ref(xr)
    (yr * coeff).sum().backward()
    assert torch.allclose(y, yr[start : start + rows[r]], atol=1e-5), (y, yr)
    assert torch.allclose(x.grad, xr.grad[start : start + rows[r]], atol=1e-5)
    wsum = hvd.allreduce(bn.weight.grad, op=hvd.Sum, name="sbn.w")
    assert torch.allclose(wsum, ref.weight.grad, atol=1e-4), (wsum, ref.weight.grad)
    assert torch.allclose(bn.running_mean, ref.running_mean, atol=1e-6)
    assert torch.allclose(bn.running_var, ref.running_var, atol=1e-5)
    bn.eval()
    assert torch.allclose(bn(xs[r]), ref.eval()(xs[r]), atol=1e-5)


def sc_elastic_state():
    r, n = hvd.rank(), hvd.size()
    model = _model(seed=r)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.9)
    sampler = hvd.elastic.ElasticSampler(list(range(10)), shuffle=True, seed=3)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=r, batch=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        assert state.epoch == 0 and opt.param_groups[0]["lr"] == 0.1  # rank 0's, synced
        torch.manual_seed(0)
        assert torch.equal(model[0].weight, _model()[0].weight)
        everyone = hvd.allgather_object(list(iter(state.sampler)))
        assert set(sum(everyone, [])) == set(range(10)), everyone  # every sample, padded
        assert all(len(e) == -(-10 // n) for e in everyone), everyone
        state.sampler.record_batch(0, 1)  # one sample per rank done
        state.batch = 1
        state.commit()
        before = [p.detach().clone() for p in model.parameters()]
        torch.nn.functional.mse_loss(model(_batch(r)[0]), _batch(r)[1]).backward()
        opt.step()
        state.batch = 2
        state.restore()  # back to the commit: parameters, optimizer, sampler, values
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before))
        assert state.batch == 1 and state.sampler.processed_num == n
        assert len(state.sampler) == -(-(10 - n) // n)
        return "done"

    assert train(state) == "done" and calls == [1]


def _every_collective(x, y):
    """Each differentiable collective once (torch.compile's custom ops when compiled)."""
    r, n = hvd.rank(), hvd.size()
    a = hvd.allreduce(x * 2, op=hvd.Sum)
    g = hvd.allgather(y)
    b = hvd.broadcast(x + 1, root_rank=0)
    gs = hvd.grouped_allreduce([x, y.sum() * x], op=hvd.Average)
    rs = hvd.reducescatter(y.sum() * torch.ones(2 * n, 3) * (r + 1), op=hvd.Sum)
    rows = torch.arange(n * 2.0).reshape(n, 2) + x.sum()
    out, received = hvd.alltoall(rows, splits=[1] * n)
    out = out + hvd.alltoall(rows)
    parts = [a, g, b, gs[0], gs[1], rs, out]
    return sum((p * (i + 1)).sum() for i, p in enumerate(parts)), received


def sc_compiled():
    """torch.compile(fullgraph=True) over every collective: no graph break, the eager values
    and gradients, with the graph-only backend and with inductor's code."""
    r, n = hvd.rank(), hvd.size()
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        x = torch.full((3,), float(r + 1), requires_grad=True)
        # The same shapes on every rank: a compiled graph runs its collectives in the order the
        # compiler chose, the same order only where every rank compiled the same graph.
        y = torch.full((2, 3), float(r), requires_grad=True)
        eager, received = _every_collective(x, y)
        eager.backward()
        want = (x.grad.clone(), y.grad.clone())
        x.grad = y.grad = None
        compiled = torch.compile(_every_collective, fullgraph=True, backend=backend)
        got, got_received = compiled(x, y)
        got.backward()
        assert torch.allclose(got, eager), (backend, got, eager)
        assert torch.equal(got_received, received), (backend, got_received, received)
        assert torch.allclose(x.grad, want[0]) and torch.allclose(y.grad, want[1]), backend
    # A compiled model trained with DistributedOptimizer: the same weights as eager.
    sgd = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    want, _ = _train(sgd)
    model = _model(seed=r)
    opt = hvd.DistributedOptimizer(
        sgd(model.parameters()), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    step = torch.compile(model, fullgraph=True, backend="aot_eager")
    for k in range(3):
        opt.zero_grad()
        x, y = _batch(r + 100 * k)
        torch.nn.functional.mse_loss(step(x), y).backward()
        opt.step()
    _close(model, want)
    assert n == hvd.size()


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
