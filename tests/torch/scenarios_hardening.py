"""horovod.torch under bad input and upstream's contracts (issue 54): `mpirun -np N python
tests/torch/scenarios_hardening.py NAME[,NAME...]`, the protocol of tests/support/scenario.py.

ml_dtypes is made unimportable first, as it is absent from the torch image: bfloat16 must
reach the engine without it."""

import sys

sys.modules["ml_dtypes"] = None  # noqa: E402  (import ml_dtypes now raises ImportError)

import threading  # noqa: E402

import torch  # noqa: E402

import horovod.torch as hvd  # noqa: E402
from tests.support import scenario  # noqa: E402
from tests.support.scenario import expect_error  # noqa: E402

torch.set_num_threads(1)
BF16 = torch.bfloat16


def _still_in_step():
    """Every rank is at the same op after an error: the engine was left usable and aligned."""
    n = hvd.size()
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="aligned")
    assert torch.equal(got, torch.full((2,), float(n))), got


# ---- 1. bfloat16 without ml_dtypes ------------------------------------------------------


def sc_bfloat16():
    r, n = hvd.rank(), hvd.size()
    try:
        import ml_dtypes  # noqa: F401, PLC0415

        raise AssertionError("ml_dtypes is importable: the scenario would not test its absence")
    except ImportError:
        pass
    x = torch.full((5,), 1.5 + r, dtype=BF16)
    total = sum(1.5 + q for q in range(n))
    got = hvd.allreduce(x, op=hvd.Sum, name="bf.sum")
    assert got.dtype == BF16 and torch.equal(got, torch.full((5,), total, dtype=BF16)), got
    got = hvd.allreduce(x, name="bf.avg")
    assert torch.allclose(got.double(), torch.full((5,), total / n).double(), atol=1e-2), got
    y = x.clone()
    assert hvd.allreduce_(y, op=hvd.Sum, name="bf.inplace") is y and y[0].item() == total
    got = hvd.allgather(x[: r + 1], name="bf.ag")
    assert got.dtype == BF16 and got.tolist() == [1.5 + q for q in range(n) for _ in range(q + 1)]
    assert torch.equal(hvd.broadcast(x, n - 1, name="bf.bc"), torch.full((5,), 0.5 + n, dtype=BF16))
    got = hvd.reducescatter(torch.ones(2 * n, dtype=BF16), op=hvd.Sum, name="bf.rs")
    assert got.dtype == BF16 and got.tolist() == [float(n)] * 2, got
    got = hvd.alltoall(torch.full((n,), float(r), dtype=BF16), name="bf.a2a")
    assert got.dtype == BF16 and got.tolist() == [float(q) for q in range(n)], got
    assert hvd.allgather_object(x)[n - 1].tolist() == [0.5 + n] * 5
    # Compression to bf16 and fp16 of a float32 tensor: cast for the wire, back on return.
    for comp in (hvd.Compression.bf16, hvd.Compression.fp16):
        got = hvd.allreduce(torch.full((3,), 2.0), op=hvd.Sum, compression=comp, name=f"bf.{comp}")
        assert got.dtype == torch.float32 and got.tolist() == [2.0 * n] * 3, got
    # A bf16 model: parameters broadcast, gradients averaged by DistributedOptimizer.
    torch.manual_seed(r)
    model = torch.nn.Linear(4, 2).to(BF16)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    weights = hvd.allgather_object(model.weight.detach().clone())
    assert all(torch.equal(w, weights[0]) for w in weights), weights
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0), named_parameters=model.named_parameters()
    )
    before = model.weight.detach().clone()
    model(torch.full((1, 4), float(r + 1), dtype=BF16)).sum().backward()
    opt.step()
    # d(sum)/dW = x for each output row: the average of the ranks' x is (n + 1) / 2.
    want = before - (n + 1) / 2
    assert model.weight.dtype == BF16 and torch.allclose(
        model.weight.double(), want.double(), atol=3e-2
    ), (model.weight, want)


# ---- 2. torch.compile without fullgraph: graph breaks, eager results ----------------------


def _handle_path_ops(x):
    n, r = hvd.size(), hvd.rank()
    out = [hvd.synchronize(hvd.allreduce_async(x, name="cp.async", op=hvd.Sum))]
    y = x.clone()
    hvd.allreduce_(y, name="cp.inplace", op=hvd.Sum)
    out.append(y)
    out.append(hvd.synchronize(hvd.allreduce_async_(x.clone(), name="cp.async_", op=hvd.Sum)))
    out += hvd.grouped_allreduce_([x.clone(), x.clone()], name="cp.g_", op=hvd.Sum)
    out += hvd.synchronize(hvd.grouped_allreduce_async([x, x * 3], name="cp.ga", op=hvd.Sum))
    out += hvd.grouped_allgather([x, x * 2], name="cp.gag")
    out += hvd.grouped_reducescatter([x.repeat(n), x.repeat(n)], name="cp.grs", op=hvd.Sum)
    z = x.clone()
    hvd.broadcast_(z, 0, name="cp.bc_")
    out.append(z)
    out.append(hvd.synchronize(hvd.broadcast_async(x, 0, name="cp.bca")))
    out.append(hvd.synchronize(hvd.allgather_async(x, name="cp.aga")))
    out.append(hvd.synchronize(hvd.reducescatter_async(x.repeat(n), name="cp.rsa")))
    out.append(hvd.synchronize(hvd.alltoall_async(x.repeat(n), name="cp.a2aa"))[0])
    out.append(torch.tensor(hvd.broadcast_object([r, "x"] if r == 0 else None, 0)[0]))
    out.append(torch.tensor(hvd.allgather_object(r)))
    hvd.barrier()
    return [o * 1 for o in out]


def sc_compile_graph_breaks():
    """Every public op off the custom-op path, inside torch.compile without fullgraph: each
    breaks the graph and runs eagerly, with the eager results, on every rank (broadcast_object
    used to fail while tracing on the root only, leaving the others waiting)."""
    r = hvd.rank()
    x = torch.arange(4.0) + r
    want = _handle_path_ops(x)
    got = torch.compile(_handle_path_ops, backend="aot_eager")(x)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.equal(a, b), (a, b)
    # The state broadcasts too, in a compiled function.
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1))

    def sync():
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        return model.weight * 1

    w = torch.compile(sync, backend="aot_eager")()
    ws = hvd.allgather_object(w.detach())
    assert all(torch.equal(v, ws[0]) for v in ws) and opt.param_groups[0]["lr"] == 0.1


# ---- 4, 5, 9: the optimizer's contracts --------------------------------------------------


def _linear(seed, rows_in=3, rows_out=2):
    torch.manual_seed(seed)
    return torch.nn.Linear(rows_in, rows_out)


def _x(q):
    return torch.full((1, 3), float(q + 1))


def sc_optimizer_process_set_outside():
    """Upstream's test_optimizer_process_sets: every rank wraps its optimizer with the set of
    even ranks; members average among themselves, the others step on their own gradients."""
    r, n = hvd.rank(), hvd.size()
    evens = hvd.add_process_set(list(range(0, n, 2)))
    try:
        model = _linear(0)
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=1.0),
            named_parameters=model.named_parameters(),
            process_set=evens,
        )
        before = model.weight.detach().clone()
        model(_x(r)).sum().backward()
        opt.step()
        group = list(range(0, n, 2)) if r % 2 == 0 else [r]
        grad = sum(_x(q) for q in group) / len(group)
        assert torch.allclose(model.weight, before - grad.expand(2, 3)), (r, model.weight)
        hvd.barrier()
    finally:
        hvd.remove_process_set(evens)


def sc_two_grouped_optimizers():
    """An encoder's and a decoder's DistributedOptimizer, each with groups=1, reduced in one
    backward: their groups are in flight at once, under names of their own."""
    r, n = hvd.rank(), hvd.size()
    enc, dec = _linear(1, 3, 4), _linear(2, 4, 2)
    opts = [
        hvd.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=1.0),
            named_parameters=m.named_parameters(prefix=p),
            groups=1,
        )
        for m, p in ((enc, "encoder"), (dec, "decoder"))
    ]
    ref_enc, ref_dec = _linear(1, 3, 4), _linear(2, 4, 2)
    dec(enc(_x(r))).sum().backward()
    for o in opts:
        o.step()
    sum(ref_dec(ref_enc(_x(q))).sum() for q in range(n)).div(n).backward()
    for m, ref in ((enc, ref_enc), (dec, ref_dec)):
        for p, q in zip(m.parameters(), ref.parameters()):
            assert torch.allclose(p, q.detach() - q.grad, atol=1e-5), (p, q)


def sc_load_state_dict_resets():
    """load_state_dict forgets the passes counted so far, as upstream: with
    backward_passes_per_step=2, one pass, a load, then two passes and a step work."""
    r = hvd.rank()
    model = _linear(3)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=2,
    )
    model(_x(r)).sum().backward()
    opt.load_state_dict(opt.state_dict())
    opt.zero_grad()
    for _ in range(2):
        model(_x(r)).sum().backward()
    opt.step()
    weights = hvd.allgather_object(model.weight.detach())
    assert all(torch.equal(w, weights[0]) for w in weights), weights


def sc_in_place_negative_view():
    """An in-place op on a lazily negated view writes the result through the view, into the
    tensor's memory (it wrote a resolved copy, leaving the tensor unchanged)."""
    r, n = hvd.rank(), hvd.size()
    base = torch.full((3,), float(r + 1))
    view = base._neg_view()
    assert hvd.allreduce_(view, op=hvd.Sum, name="neg.ar") is view
    total = sum(q + 1 for q in range(n))
    assert view.tolist() == [-total] * 3 and base.tolist() == [total] * 3, (view, base)
    base = torch.full((2,), float(r + 1))
    view = base._neg_view()
    hvd.broadcast_(view, n - 1, name="neg.bc")
    assert base.tolist() == [float(n)] * 2, base


# ---- 10. one rank's bad input fails every rank, named -------------------------------------


def sc_bad_input_on_one_rank():
    odd = hvd.rank() == hvd.size() - 1  # the rank whose input is bad
    _not_a_tensor(odd)
    _still_in_step()
    _empty_group_on_one_rank(odd)
    _not_a_process_set_on_one_rank(odd)
    _still_in_step()
    _objects_that_do_not_pickle(odd)
    _still_in_step()
    _state_dict_key_more_on_one_rank(odd)
    _still_in_step()
    _sparse_gradient_without_nonzeros_on_one_rank(odd)
    _still_in_step()
    _sparse_gradient_on_one_rank_dense_on_the_others(odd)
    _still_in_step()


def _not_a_tensor(odd):
    """Not a tensor (a NumPy array, a list) on one rank: named on every rank; every rank
    passing an array: the same clear message, not an AttributeError."""
    n = hvd.size()
    good = torch.ones(2, 3)
    for i, (op, bad) in enumerate(
        (
            (lambda t, k: hvd.allgather(t, name=k), good.numpy()),
            (lambda t, k: hvd.allgather(t, name=k), [1.0, 2.0]),
            (lambda t, k: hvd.grouped_allgather([good, t], name=k), good.numpy()),
            (lambda t, k: hvd.grouped_reducescatter([t], name=k), good.numpy()),
            (lambda t, k: hvd.reducescatter(t, name=k), [1.0] * n),
            (lambda t, k: hvd.alltoall(t, name=k), good.numpy()),
        )
    ):
        key = f"bad.{i}"
        expect_error(lambda: op(bad if odd else good, key), (TypeError, ValueError), key)
    msg = expect_error(lambda: hvd.allgather(good.numpy(), name="bad.all"), TypeError, "bad.all")
    assert "torch.Tensor" in msg, msg


def _empty_group_on_one_rank(odd):
    """The others' group sizes are named on every rank; an empty group on every rank is []."""
    n = hvd.size()
    parts = [] if odd else [torch.ones(2), torch.ones(3)]
    for fn in (hvd.grouped_allreduce, hvd.grouped_allgather):
        expect_error(lambda: fn(parts, name="bad.empty"), RuntimeError, "0 tensors", f"[{n - 1}]")
    assert hvd.grouped_allreduce([], name="bad.all.empty") == []


def _not_a_process_set_on_one_rank(odd):
    """A process set that is not one (a str) on one rank."""
    ps = "global" if odd else hvd.global_process_set
    expect_error(
        lambda: hvd.allreduce(torch.ones(1), name="bad.ps", process_set=ps), ValueError, "bad.ps"
    )
    expect_error(
        lambda: hvd.allgather_object(hvd.rank(), process_set=ps), ValueError, "process_set"
    )


def _objects_that_do_not_pickle(odd):
    """At the root of a broadcast, or on one rank of an allgather."""
    r, n = hvd.rank(), hvd.size()
    lock = threading.Lock()
    expect_error(
        lambda: hvd.broadcast_object(lock if r == 0 else None, 0, name="bad.obj"),
        ValueError,
        "rank 0",
        "pickle",
    )
    expect_error(
        lambda: hvd.allgather_object(lock if odd else r, name="bad.objs"),
        ValueError,
        f"rank {n - 1}",
        "pickle",
    )


def _state_dict_key_more_on_one_rank(odd):
    state = {"w": torch.ones(2)}
    if odd:
        state["extra"] = torch.ones(1)
    expect_error(
        lambda: hvd.broadcast_parameters(state, root_rank=0),
        ValueError,
        f"rank {hvd.size() - 1} has ['broadcast.param.extra'] more",
    )


def _sparse_gradient_without_nonzeros_on_one_rank(odd):
    """Its rows are as wide as the others'."""
    n = hvd.size()
    torch.manual_seed(0)
    emb = torch.nn.Embedding(5, 2, sparse=True)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(emb.parameters(), lr=1.0), named_parameters=emb.named_parameters()
    )
    before = emb.weight.detach().clone()
    (emb(torch.tensor([1, 3])).sum() * (0.0 if odd else 1.0)).backward()
    if odd:
        emb.weight.grad = torch.sparse_coo_tensor(
            torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, 2), (5, 2)
        )
    opt.step()
    step = torch.zeros(5, 2)
    step[[1, 3]] = (n - 1) / n  # the mean of n - 1 ones and one rank's nothing
    assert torch.allclose(emb.weight, before - step), (emb.weight, before)


def _sparse_gradient_on_one_rank_dense_on_the_others(odd):
    """Both kinds are named on every rank."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(5, 2, sparse=odd)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(emb.parameters(), lr=0.1), named_parameters=emb.named_parameters()
    )
    emb(torch.tensor([1, 2])).sum().backward()
    expect_error(opt.step, RuntimeError, "grad.weight", "ALLGATHER", f"[{hvd.size() - 1}]")


# ---- 11. Average while ranks have joined --------------------------------------------------


def sc_join_average():
    """Upstream's semantics by default: the joined ranks' zeros count in the average."""
    r, n = hvd.rank(), hvd.size()
    if r == 0:
        hvd.join()
        return
    got = hvd.allreduce(torch.full((2,), float(r)), name="join.avg")
    assert torch.allclose(got, torch.full((2,), sum(range(n)) / n)), got
    hvd.join()


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
