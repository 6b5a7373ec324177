"""horovod.torch's elastic state and SyncBatchNorm dtypes (issue 54, classes 7 and 8):
`mpirun -np N python tests/torch/scenarios_state.py NAME[,NAME...]`, each checked against what
every rank can compute itself (the protocol of tests/support/scenario.py)."""

import copy
import math
import pickle
import sys

import torch

import horovod.torch as hvd
from horovod.common.exceptions import HostsUpdatedInterrupt
from tests.support import scenario
from tests.support.scenario import expect_error

torch.set_num_threads(1)

# (parameter dtype, input dtype) pairs that torch.nn.BatchNorm1d accepts on the CPU (torch
# 2.14: the same dtype, or float32 parameters under a 16-bit input; any other mix is its
# "mixed dtype (CPU)" error). Its output has the input's dtype, its running statistics the
# parameters'.
BN_DTYPES = [
    (torch.float32, torch.float32),
    (torch.float64, torch.float64),
    (torch.bfloat16, torch.bfloat16),
    (torch.float16, torch.float16),
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float16),
]


def _tol(dtype):
    # A few units in the last place of the output's dtype (values here are below ~4): torch
    # normalizes 16-bit inputs in float32, this module in float64, both round once at the end.
    return {torch.bfloat16: 5e-2, torch.float16: 8e-3, torch.float32: 1e-5}.get(dtype, 1e-10)


def _close(got, want, what, tol=None):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    tol = tol or _tol(want.dtype)
    assert torch.allclose(got.double(), want.double(), atol=tol, rtol=tol), (what, got, want)


def _bn_pair(pdt, track=True, seed=5):
    """A SyncBatchNorm and a torch BatchNorm1d with the same (random, seeded) weight and bias."""
    g = torch.Generator().manual_seed(seed)
    w, b = torch.rand(3, generator=g) + 0.5, torch.randn(3, generator=g)
    mods = []
    for cls in (hvd.SyncBatchNorm, torch.nn.BatchNorm1d):
        m = cls(3, momentum=0.3, track_running_stats=track).to(pdt)
        with torch.no_grad():
            m.weight.copy_(w)
            m.bias.copy_(b)
        mods.append(m)
    return mods


def _global_batch(n, shape, idt):
    """Every rank's input (rank q has q + 2 rows: unequal batches), in dtype `idt`."""
    rows = [q + 2 for q in range(n)]
    xs = [
        (torch.randn(k, *shape, generator=torch.Generator().manual_seed(q)) * 2 + 1).to(idt)
        for q, k in enumerate(rows)
    ]
    return xs, rows


def sc_sync_batch_norm_dtypes():
    # Training: output, its dtype, input and weight gradients and running statistics equal one
    # BatchNorm1d over the concatenated global batch, for each dtype pair torch accepts.
    r, n = hvd.rank(), hvd.size()
    for pdt, idt in BN_DTYPES:
        for shape in ((3, 4), (3,)):
            what = f"{pdt}/{idt} {shape}"
            tol = max(_tol(pdt), _tol(idt))  # float32 parameters' gradients of a 16-bit input
            xs, rows = _global_batch(n, shape, idt)
            start = sum(rows[:r])
            mine = slice(start, start + rows[r])
            coeff = torch.randn(sum(rows), *shape, generator=torch.Generator().manual_seed(9))
            coeff = coeff.to(idt)
            bn, ref = _bn_pair(pdt)
            x = xs[r].clone().requires_grad_(True)
            y = bn(x)
            (y * coeff[mine]).double().sum().backward()
            xr = torch.cat(xs).requires_grad_(True)
            yr = ref(xr)
            (yr * coeff).double().sum().backward()
            assert y.dtype == idt, (what, y.dtype)
            _close(y, yr[mine].detach(), f"output {what}")
            _close(x.grad, xr.grad[mine], f"input grad {what}")
            assert bn.weight.grad.dtype == pdt, (what, bn.weight.grad.dtype)
            for mine_p, ref_p, name in ((bn.weight, ref.weight, "w"), (bn.bias, ref.bias, "b")):
                total = hvd.allreduce(mine_p.grad, op=hvd.Sum, name=f"sbn.{name}.{pdt}.{idt}")
                _close(total, ref_p.grad, f"{name} grad {what}", tol)
            for buf in ("running_mean", "running_var"):
                assert getattr(bn, buf).dtype == pdt, (what, buf, getattr(bn, buf).dtype)
                _close(getattr(bn, buf), getattr(ref, buf), f"{buf} {what}", tol)
            assert int(bn.num_batches_tracked) == 1
            # Eval: the running statistics (the same on every rank), the input's dtype.
            bn.eval()
            ref.eval()
            y = bn(xs[r])
            assert y.dtype == idt, (what, "eval", y.dtype)
            _close(y, ref(xs[r]), f"eval {what}")


def sc_sync_batch_norm_dtypes_batch_stats():
    # Without running statistics, eval mode also normalizes by the global batch (synced).
    r, n = hvd.rank(), hvd.size()
    for pdt, idt in BN_DTYPES:
        xs, rows = _global_batch(n, (3, 2), idt)
        start = sum(rows[:r])
        bn, ref = _bn_pair(pdt, track=False)
        for train in (True, False):
            bn.train(train)
            ref.train(train)
            with torch.no_grad():
                y, yr = bn(xs[r]), ref(torch.cat(xs))
            assert y.dtype == idt, (pdt, idt, train, y.dtype)
            _close(y, yr[start : start + rows[r]], f"{pdt}/{idt} train={train}")
    # Affine off: no parameters, the output is still the input's dtype.
    xs, rows = _global_batch(n, (3,), torch.bfloat16)
    bn, ref = hvd.SyncBatchNorm(3, affine=False), torch.nn.BatchNorm1d(3, affine=False)
    y, yr = bn(xs[r]), ref(torch.cat(xs))
    start = sum(rows[:r])
    _close(y, yr[start : start + rows[r]], "affine=False bf16")


def _shards(sampler):
    """Every rank's samples of `sampler`, by rank (each rank's own iteration)."""
    return hvd.allgather_object(list(iter(sampler)))


def sc_elastic_sampler_equal_shards():
    # Dataset sizes that do not divide by the ranks, fewer samples left than ranks, and an
    # empty rest, after partial epochs of any progress, shuffled or not: every rank has the
    # same len() and iterates exactly that many samples, ceil(left / n); the shards together
    # are the samples left (the first ones repeated to pad), in the epoch's order.
    n = hvd.size()
    for shuffle in (False, True):
        for size in range(0, 3 * n + 2):
            dataset = list(range(size))
            fresh = hvd.elastic.ElasticSampler(dataset, shuffle=shuffle, seed=11)
            full = _shards(fresh)
            epoch_order = [full[i % n][i // n] for i in range(size)]  # rank r: positions r::n
            assert sorted(epoch_order) == dataset, (shuffle, size, full)
            if not shuffle:
                assert epoch_order == dataset, epoch_order
            progress = range(0, size + n + 1)
            mine = []  # (len, samples) at each progress: one allgather for them all
            for processed in progress:
                s = hvd.elastic.ElasticSampler(dataset, shuffle=shuffle, seed=11)
                s.load_state_dict({"epoch": 0, "processed_num": processed})
                mine.append((len(s), list(iter(s))))
            everyone = hvd.allgather_object(mine)
            for i, processed in enumerate(progress):
                what = (shuffle, size, processed)
                left = epoch_order[processed:]
                want = math.ceil(len(left) / n)
                lens = [e[i][0] for e in everyone]
                shards = [e[i][1] for e in everyone]
                assert lens == [want] * n, (what, lens)
                assert [len(x) for x in shards] == [want] * n, (what, shards)
                order = [shards[j % n][j // n] for j in range(want * n)]
                padded = (left * n)[: want * n] if left else []
                assert order == padded, (what, order, padded)


def sc_elastic_sampler_training_steps():
    # A DataLoader over the sampler takes as many steps on every rank, in a whole epoch and in
    # the rest of one resumed from a commit (record_batch, TorchState restore); set_epoch starts
    # the next whole epoch.
    r, n = hvd.rank(), hvd.size()
    for size, batch in ((10, 2), (7, 3), (2 * n + 1, 1), (1, 2)):
        dataset = list(range(size))
        sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
        sampler.set_epoch(r)  # another permutation on each rank until the sync
        state = hvd.elastic.TorchState(sampler=sampler, epoch=0)
        state.sync()
        everyone = hvd.allgather_object(list(iter(sampler)))
        assert sorted(set(sum(everyone, []))) == dataset, everyone  # rank 0's epoch, shared
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=sampler)
        steps = hvd.allgather_object(len(loader))
        assert steps == [math.ceil(math.ceil(size / n) / batch)] * n, (size, batch, steps)
        for i, _ in enumerate(loader):
            if i == 0:
                state.sampler.record_batch(i, batch)
                state.commit()
        state.restore()  # back to one batch done: the rest of the epoch
        left = max(size - batch * n, 0)
        assert hvd.allgather_object(len(sampler)) == [math.ceil(left / n)] * n
        done = hvd.allgather_object(sum(1 for _ in loader))
        assert done == [math.ceil(math.ceil(left / n) / batch)] * n, (size, batch, done)
        sampler.set_epoch(1)
        assert sampler.processed_num == 0 and len(sampler) == math.ceil(size / n)


def _encoder(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 2)
    )


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _step(module, opt, seed):
    """One training step of `module` on a batch of `seed` (the module's own input width)."""
    g = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(5, module[0].in_features, generator=g)
    opt.zero_grad()
    module(x).pow(2).mean().backward()
    opt.step()


def _parts(seed, lr):
    """A model and its SGD, an encoder with buffers (BatchNorm) and its Adam, of `seed`."""
    model, encoder = _model(seed), _encoder(seed + 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    enc_opt = torch.optim.Adam(encoder.parameters(), lr=lr / 10)
    return model, opt, encoder, enc_opt


def _rank0_parts():
    """What rank 0 holds when the state first syncs: computed here on every rank."""
    model, opt, encoder, enc_opt = _parts(0, 0.1)
    _step(model, opt, 0)
    _step(encoder, enc_opt, 0)
    return model, opt, encoder, enc_opt


def _same_tree(got, want, what):
    if isinstance(want, torch.Tensor):
        assert torch.equal(got, want), (what, got, want)
    elif isinstance(want, dict):
        assert sorted(got, key=str) == sorted(want, key=str), (what, list(got), list(want))
        for k in want:
            _same_tree(got[k], want[k], f"{what}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), (what, got, want)
        for i, (a, b) in enumerate(zip(got, want)):
            _same_tree(a, b, f"{what}[{i}]")
    else:
        assert got == want, (what, got, want)


def _copy_state(state):
    """Deep copies of every module's and optimizer's state_dict and the plain values."""
    names = ("model", "opt", "encoder", "enc_opt")
    return {k: copy.deepcopy(getattr(state, k).state_dict()) for k in names} | {
        "epoch": state.epoch,
        "notes": list(state.notes),
    }


def _check(state, want, what):
    for k, v in want.items():
        got = getattr(state, k)
        _same_tree(got.state_dict() if hasattr(got, "state_dict") else got, v, f"{what} {k}")


def _state_for(r):
    model, opt, encoder, enc_opt = _parts(r, 0.1 * (r + 1))
    if r == 0:  # rank 0 alone has optimizer state and trained BatchNorm buffers
        _step(model, opt, 0)
        _step(encoder, enc_opt, 0)
    state = hvd.elastic.TorchState(
        model, None, opt=opt, encoder=encoder, enc_opt=enc_opt, epoch=r, notes=[r]
    )
    return state, (model, opt, encoder, enc_opt)


def sc_torch_state_extra_modules():
    # Modules and optimizers given as keyword arguments are tracked like the positional model:
    # sync makes them rank 0's (parameters, buffers, optimizer state), commit saves and restore
    # brings them back (also twice: a restored optimizer must not share tensors with the save),
    # plain values keep their pickled behaviour.
    r = hvd.rank()
    state, (model, opt, encoder, enc_opt) = _state_for(r)
    assert state.model is model and state.opt is opt and state.optimizer is None
    assert state.encoder is encoder and state.enc_opt is enc_opt
    want_model, want_opt, want_enc, want_enc_opt = _rank0_parts()
    synced = {
        "model": want_model.state_dict(),
        "opt": want_opt.state_dict(),
        "encoder": want_enc.state_dict(),
        "enc_opt": want_enc_opt.state_dict(),
        "epoch": 0,
        "notes": [0],
    }
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(1)
        _check(state, synced, "synced")
        assert enc_opt.state  # rank 0's Adam moments, also where none were before the sync
        state.commit()
        committed = _copy_state(state)
        for k in range(2):
            for _ in range(2):  # every tracked value moves away from the commit
                _step(model, opt, 10 + r + k)
                _step(encoder, enc_opt, 20 + r + k)
                enc_opt.param_groups[0]["lr"] = 0.5
                state.epoch += 1
                state.notes = state.notes + [k]
            state.restore()
            _check(state, committed, f"restore {k}")
        return "done"

    assert train(state) == "done" and calls == [1]


def sc_torch_state_extra_modules_loop():
    # In hvd.elastic.run: a HostsUpdatedInterrupt syncs rank 0's current modules again before
    # the next call; a HorovodInternalError restores the extra modules' last commit (the world
    # is fixed here, so it is re-raised, naming the elastic launch).
    r = hvd.rank()
    state, (model, opt, encoder, enc_opt) = _state_for(r)
    calls = []

    @hvd.elastic.run
    def interrupted(state):
        calls.append(1)
        if len(calls) == 1:
            with torch.no_grad():
                encoder[0].weight.fill_(r + 1.0)
                encoder[1].running_mean.fill_(r + 3.0)
            state.epoch = 10 + r
            raise HostsUpdatedInterrupt(False)
        assert torch.equal(encoder[0].weight, torch.ones_like(encoder[0].weight))
        assert torch.equal(encoder[1].running_mean, torch.full((3,), 3.0))
        assert state.epoch == 0  # a plain value: rank 0's last save, as upstream's ObjectState
        return len(calls)

    assert interrupted(state) == 2

    @hvd.elastic.run
    def failing(state):
        state.commit()
        state.saved = _copy_state(state)
        _step(encoder, enc_opt, 30 + r)
        state.epoch = 99
        raise hvd.HorovodInternalError("injected")

    expect_error(lambda: failing(state), hvd.HorovodInternalError, "fixed set of ranks")
    _check(state, state.saved, "after HorovodInternalError")


def sc_torch_state_snapshot_resume():
    # What an elastic relaunch does (elastic_worker.resume): a new process's TorchState, with
    # fresh modules of its own, loads the newest commit's snapshot (pickled, on the CPU) and
    # restores it: the extra modules and optimizers come back with the positional ones.
    r = hvd.rank()
    state, (model, opt, encoder, enc_opt) = _state_for(r)
    state.sync()
    _step(encoder, enc_opt, 40 + r)
    _step(model, opt, 50 + r)
    state.epoch = 3
    state.commit()
    committed = _copy_state(state)
    blob = pickle.dumps(state._snapshot())
    fresh, held = _state_for(r + 7)
    fresh._load_snapshot(pickle.loads(blob))
    fresh.restore()
    _check(fresh, committed, "resumed")
    # Into the objects the script holds (its optimizers step those parameters), not copies.
    for k, obj in zip(("model", "opt", "encoder", "enc_opt"), held):
        assert getattr(fresh, k) is obj, k


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
