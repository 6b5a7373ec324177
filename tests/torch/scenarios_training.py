"""horovod.torch's training pieces (scenarios.py runs them): DistributedOptimizer (also with
Adasum and sparse gradients) against one process on every rank's data, the optimizer state's
broadcast, SyncBatchNorm, the elastic state and torch.compile, each checked against what every
rank can compute itself."""

import warnings

import numpy as np
import torch

import horovod.torch as hvd
from tests.support.reference import adasum
from tests.support.scenario import expect_error

torch.set_num_threads(1)


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
    parameters move by the Adasum of the members' deltas, tensor by tensor (the NumPy
    reference of tests/support/reference.py, as every suite's Adasum scenarios use it)."""
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
    # Splits as a tensor: a graph break (their values), then the received splits like them.
    split_as = torch.compile(lambda t, s: hvd.alltoall(t, splits=s)[1], backend="aot_eager")
    got = split_as(torch.ones(n, 2), torch.ones(n, dtype=torch.int32))
    assert got.dtype == torch.int32 and got.tolist() == [1] * n, got
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
