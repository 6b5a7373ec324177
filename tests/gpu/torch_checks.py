"""horovod.torch on CUDA tensors (one GPU per rank): `mpirun -np N python
tests/gpu/torch_checks.py torch_cuda`, the protocol of tests/support/scenario.py. Each
collective, its in-place and grouped forms, a gradient, a DistributedOptimizer step and
SyncBatchNorm on the GPU give what the same calls give on CPU tensors in the same run.
scripts/gpu_check.sh runs it where torch sees a GPU."""

import sys

import torch

import horovod.torch as hvd
from tests.support import scenario

# Where no GPU is visible (a dry run of this file on a CPU machine) both sides are CPU tensors.
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _same(gpu, cpu, what):
    assert gpu.device.type == DEVICE.type, (what, gpu.device)
    assert torch.allclose(gpu.cpu().double(), cpu.double(), atol=1e-4), (what, gpu, cpu)
    print(f"PASS torch {what} ({DEVICE.type})", flush=True)


def sc_torch_cuda():
    r, n = hvd.rank(), hvd.size()
    if DEVICE.type == "cuda":
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    dev = DEVICE

    def both(fn, x, what):
        _same(fn(x.to(dev), f"g.{what}"), fn(x, f"c.{what}"), what)

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) + r
    both(lambda t, k: hvd.allreduce(t, op=hvd.Sum, name=k), x, "allreduce sum")
    both(lambda t, k: hvd.allreduce(t, name=k), x, "allreduce average")
    both(lambda t, k: hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5, name=k), x, "prescale")
    both(lambda t, k: hvd.allreduce(t.half(), op=hvd.Sum, name=k).float(), x, "float16")
    both(lambda t, k: hvd.allreduce(t.bfloat16(), op=hvd.Sum, name=k).float(), x, "bfloat16")
    both(lambda t, k: hvd.allreduce(t.int(), op=hvd.Max, name=k), x, "int32 max")
    g = x.to(dev).clone()
    ptr = g.data_ptr()
    assert hvd.allreduce_(g, op=hvd.Sum, name="g.inplace") is g and g.data_ptr() == ptr
    _same(g, hvd.allreduce(x, op=hvd.Sum, name="c.inplace"), "allreduce_ in place")
    outs = hvd.grouped_allreduce([x.to(dev), x[0].to(dev)], op=hvd.Sum, name="g.group")
    refs = hvd.grouped_allreduce([x, x[0]], op=hvd.Sum, name="c.group")
    for o, c in zip(outs, refs):
        _same(o, c, "grouped_allreduce")
    both(lambda t, k: hvd.allgather(t, name=k), x, "allgather")
    both(lambda t, k: hvd.broadcast(t, 0, name=k), x, "broadcast")
    g = x.to(dev).clone()
    assert hvd.broadcast_(g, 0, name="g.bcast_") is g
    _same(g, hvd.broadcast(x, 0, name="c.bcast_"), "broadcast_ in place")
    rows = torch.arange(2.0 * n * 3).reshape(2 * n, 3) + r
    both(lambda t, k: hvd.alltoall(t, name=k)[0], rows, "alltoall")
    both(lambda t, k: hvd.reducescatter(t, op=hvd.Sum, name=k), rows, "reducescatter")
    w = x.to(dev).requires_grad_(True)
    (hvd.allreduce(w, op=hvd.Sum, name="g.grad") * 2).sum().backward()
    _same(w.grad, torch.full_like(x, 2.0 * n), "gradient through allreduce")

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), hvd.SyncBatchNorm(8), torch.nn.Linear(8, 1))
    cpu_model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1)
    )
    cpu_model.load_state_dict(model.state_dict())
    model.to(dev)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), 0)
    data = torch.randn(6 * n, 4, generator=torch.Generator().manual_seed(1))
    mine = data[6 * r : 6 * r + 6]
    torch.nn.functional.mse_loss(model(mine.to(dev)), torch.zeros(6, 1, device=dev)).backward()
    opt.step()
    ref_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(cpu_model(data), torch.zeros(6 * n, 1)).backward()
    ref_opt.step()
    for (k, a), b in zip(model.state_dict().items(), cpu_model.state_dict().values()):
        if a.is_floating_point():
            _same(a, b, f"one optimizer step with SyncBatchNorm: {k}")


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
