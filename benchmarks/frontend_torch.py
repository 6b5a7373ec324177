"""horovod.torch against torch.distributed (gloo) on the same ranks, in one run.

    mpirun -np 2 --bind-to core python benchmarks/frontend_torch.py \
        [--bandwidth] [--training [--steps N]] [--compiled [--backend aot_eager]]

  bandwidth  float32 allreduce (sum) of 4 KiB .. 256 MiB: hvd.allreduce_ (in place) against
             torch.distributed.all_reduce (gloo, in place); busbw = bytes * 2(n-1)/n / time
  training   a ResNet-18 (11.7 M parameters, written out here: no torchvision needed) on
             synthetic 64x64 images, batch 16 per rank, one thread per rank: images/s per rank of
             hvd.DistributedOptimizer, of DDP (gloo; default buckets, and gradient_as_bucket_view)
             and of the same model without communication (what the step costs alone)
  compiled   the same ResNet-18 step through hvd.DistributedOptimizer, eager against
             torch.compile(model) (BACKEND: inductor by default, which needs a C++ compiler;
             aot_eager), and both without communication
Each figure is the median of 5 trials that interleave the methods (a noisy moment hits each
alike); the slowest rank's time counts. torch.distributed rendezvous on 127.0.0.1 (one host).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import horovod.torch as hvd

torch.set_num_threads(1)
hvd.init()
R, N = hvd.rank(), hvd.size()
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")
dist.init_process_group("gloo", rank=R, world_size=N)


def say(*a):
    if R == 0:
        print(*a, flush=True)


CPU = {}  # method -> the ranks' mean CPU seconds per call (every thread of the process)


def trial(fn, iters, cpu=None):
    """Seconds per call, all ranks starting together, the slowest rank's (and, into `cpu`, the
    CPU seconds the ranks' processes spent per call, on average)."""
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        fn()
    t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    c = torch.tensor([(time.process_time() - c0) / iters], dtype=torch.float64)
    if cpu is not None:
        cpu.append(float(hvd.allreduce(c, op=hvd.Average, name="bench.cpu")))
    return float(hvd.allreduce(t, op=hvd.Max, name="bench.time"))


def medians(fns, iters, trials=5):
    times = {k: [] for k in fns}
    cpus = {k: [] for k in fns}
    for _ in range(trials):
        for k, fn in fns.items():
            times[k].append(trial(fn, iters, cpus[k]))
    CPU.update({k: statistics.median(v) for k, v in cpus.items()})
    return {k: statistics.median(v) for k, v in times.items()}


def bandwidth():
    say(f"# {N} ranks, float32 allreduce (sum), torch {torch.__version__}; busbw in GB/s")
    say("    size |  horovod us   GB/s |     gloo us   GB/s | horovod/gloo")
    bus = 2 * (N - 1) / N
    for kib in (4, 64, 1024, 4096, 16384, 65536, 262144):
        n = kib * 256
        x, y = torch.ones(n), torch.ones(n)
        iters = max(3, min(2000, (256 << 20) // (kib << 10) // 4))
        for _ in range(2):
            hvd.allreduce_(x, op=hvd.Sum, name=f"bw.{kib}")
            dist.all_reduce(y)
        t = medians(
            {
                "horovod": lambda x=x, kib=kib: hvd.allreduce_(x, op=hvd.Sum, name=f"bw.{kib}"),
                "gloo": lambda y=y: dist.all_reduce(y),
            },
            iters,
        )
        b = kib * 1024 * bus / 1e9
        size = f"{kib} KiB" if kib < 1024 else f"{kib // 1024} MiB"
        say(
            f"{size:>8} | {t['horovod'] * 1e6:>10.1f} {b / t['horovod']:>6.2f} | "
            f"{t['gloo'] * 1e6:>10.1f} {b / t['gloo']:>6.2f} | {t['gloo'] / t['horovod']:>8.2f}"
        )


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = torch.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


def resnet18(classes=1000):
    layers = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def synthetic_steps(batch, image):
    """stepper(model, opt) -> one training step of `model` on a fixed synthetic batch (the same
    batch for every model, so the methods compared do the same work)."""
    torch.manual_seed(0)
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, 1000, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def stepper(model, opt):
        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()

        return step

    return stepper


def training(batch=16, image=64, steps=3):
    stepper = synthetic_steps(batch, image)

    local = resnet18()
    params = sum(p.numel() for p in local.parameters())
    hvd_model = resnet18()
    hvd_opt = hvd.DistributedOptimizer(
        torch.optim.SGD(hvd_model.parameters(), lr=0.01, momentum=0.9),
        named_parameters=hvd_model.named_parameters(),
    )
    ddp = nn.parallel.DistributedDataParallel(resnet18())
    ddp_view = nn.parallel.DistributedDataParallel(resnet18(), gradient_as_bucket_view=True)
    local_step = stepper(local, torch.optim.SGD(local.parameters(), lr=0.01, momentum=0.9))

    def in_step():  # the same step, then a barrier: what waiting for the slowest rank costs
        local_step()
        hvd.barrier()

    fns = {
        "no communication": local_step,
        "no comm., barrier": in_step,
        "horovod": stepper(hvd_model, hvd_opt),
        "DDP gloo": stepper(ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)),
        "DDP gloo, bucket view": stepper(
            ddp_view, torch.optim.SGD(ddp_view.parameters(), lr=0.01, momentum=0.9)
        ),
    }
    for fn in fns.values():
        fn()  # warm-up: allocations, the engine's response cache, DDP's buckets
    t = medians(fns, steps)
    say(
        f"# ResNet-18 ({params / 1e6:.1f} M parameters, {params * 4 / 2**20:.0f} MiB of "
        f"gradients), {image}x{image} images, batch {batch} per rank, {N} ranks, 1 thread each, "
        f"{steps} steps per trial, torch {torch.__version__}"
    )
    base = t["no communication"]
    for k, v in t.items():
        say(
            f"{k:>22}: {v * 1e3:7.1f} ms/step  {batch / v:6.1f} images/s per rank  "
            f"overhead {100 * (v - base) / v:5.1f} %  CPU {CPU[k] * 1e3:6.1f} ms/step"
        )
    say(
        f"horovod / DDP (images/s): {t['DDP gloo'] / t['horovod']:.2f} (defaults), "
        f"{t['DDP gloo, bucket view'] / t['horovod']:.2f} (bucket view)"
    )


def compiled(batch=16, image=64, steps=3, backend="inductor"):
    """Eager and compiled models, each with and without Horovod, one interleaved run."""
    stepper = synthetic_steps(batch, image)

    def make(compile_it, distributed):
        model = resnet18()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        if compile_it:
            model = torch.compile(model, backend=backend)
        return stepper(model, opt)

    fns = {
        "eager, no communication": make(False, False),
        "compiled, no communication": make(True, False),
        "eager, horovod": make(False, True),
        "compiled, horovod": make(True, True),
    }
    t0 = time.perf_counter()
    for fn in fns.values():
        fn()  # warm-up: the compilation, the engine's response cache
    warm = time.perf_counter() - t0
    t = medians(fns, steps)
    say(
        f"# ResNet-18, {image}x{image} images, batch {batch} per rank, {N} ranks, 1 thread each, "
        f"torch {torch.__version__}, torch.compile backend {backend} (warm-up with both "
        f"compilations {warm:.0f} s)"
    )
    for k, v in t.items():
        say(f"{k:>27}: {v * 1e3:7.1f} ms/step  {batch / v:6.1f} images/s per rank")
    eager, comp = t["eager, horovod"], t["compiled, horovod"]
    eager0, comp0 = t["eager, no communication"], t["compiled, no communication"]
    say(
        f"compiled / eager step time: {comp / eager:.2f} through horovod, {comp0 / eager0:.2f} "
        f"without; horovod's overhead {100 * (1 - eager0 / eager):.1f} % eager, "
        f"{100 * (1 - comp0 / comp):.1f} % compiled"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bandwidth", action="store_true")
    ap.add_argument("--training", action="store_true")
    ap.add_argument("--compiled", action="store_true")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--steps", type=int, default=3, help="training steps per trial (--training)")
    a = ap.parse_args()
    if not (a.bandwidth or a.training or a.compiled):
        a.bandwidth = a.training = True
    if a.bandwidth:
        bandwidth()
    if a.training:
        training(steps=a.steps)
    if a.compiled:
        compiled(backend=a.backend)
    dist.destroy_process_group()
    hvd.shutdown()
