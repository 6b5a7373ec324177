"""Where a large allreduce of torch tensors spends its device time, one rank: torch.profiler
(CUPTI records every CUDA activity of the process, the engine's own copies and kernels too)
over Horovod's allreduce and over torch.distributed's, in one run.

    mpirun -np 1 --bind-to none python benchmarks/gpu_torch_profile.py [--bytes N] [--iters K]
        [--trace DIR] [--cpu]

Cases (float32 sums of --bytes, default 1 GiB): horovod.numpy's allreduce into a given `out`
(what scripts/gpu_check.sh's bench times), horovod.torch's allreduce (a new output) and
allreduce_ (in place), and torch.distributed's peer as the bench runs it at one rank (a copy,
then the allreduce in place). For each: wall time per op (without the profiler), then every
device activity (kernel, memcpy, memset) with its count and time per op, so that an extra
copy, fill or allocation shows by name (issue 55: through torch, 1 GiB took 838 us against
torch's 519 us where CuPy's path took 623 us against NCCL's 509 us). --trace writes each case's
Chrome trace. --cpu: host tensors and gloo, a dry run of this script where there is no GPU
(host activities only).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

import horovod.numpy as hvd_np
import horovod.torch as hvd


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_us(fn, device, iters):
    for _ in range(2):
        fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / iters * 1e6


def device_rows(prof, iters, device):
    """(name, count per op, us per op) of each activity on the device (on the host with --cpu,
    the profiled calls' own rows), largest first."""
    rows = []
    for ev in prof.key_averages():
        if device.type == "cuda":
            us = getattr(ev, "self_device_time_total", None)
            if us is None:
                us = ev.self_cuda_time_total
            if ev.device_type != torch.autograd.DeviceType.CUDA and not us:
                continue
        else:
            us = ev.self_cpu_time_total
        if us:
            rows.append((ev.key, ev.count / iters, us / iters))
    rows.sort(key=lambda r: -r[2])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--trace", default="")
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()

    hvd.init()
    device = torch.device("cpu" if args.cpu else f"cuda:{hvd.local_rank()}")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    port = 29500 + os.getpid() % 1000
    dist.init_process_group(
        "gloo" if args.cpu else "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=hvd.rank(),
        world_size=hvd.size(),
    )
    n = args.bytes // 4
    x = torch.ones(n, dtype=torch.float32, device=device)
    out = torch.zeros_like(x)

    def torch_peer():
        out.copy_(x)
        dist.all_reduce(out)

    # horovod.numpy takes CUDA tensors as they are, host ones as NumPy views of their memory.
    xn, outn = (x.numpy(), out.numpy()) if args.cpu else (x, out)
    cases = {
        "horovod.numpy allreduce(x, out=out)": lambda: hvd_np.allreduce(
            xn, op=hvd.Sum, out=outn, name="prof.np"
        ),
        "horovod.torch allreduce(x)": lambda: hvd.allreduce(x, op=hvd.Sum, name="prof.t"),
        "horovod.torch allreduce_(out)": lambda: hvd.allreduce_(out, op=hvd.Sum, name="prof.t_"),
        "torch.distributed copy_ + all_reduce": torch_peer,
    }
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    what = f"{args.bytes} bytes float32, {hvd.size()} rank(s), {device}"
    print(f"PROF {what}, torch {torch.__version__}", flush=True)
    for what, fn in cases.items():
        wall = wall_us(fn, device, args.iters)
        with profile(activities=activities) as prof:
            for _ in range(args.iters):
                fn()
            sync(device)
        rows = device_rows(prof, args.iters, device)
        total = sum(r[2] for r in rows if device.type == "cuda")
        print(f"PROF {what}: {wall:.1f} us per op (device activities {total:.1f} us)", flush=True)
        for name, count, us in rows[:8]:
            print(f"PROF     {us:10.1f} us  x{count:g}  {name[:90]}", flush=True)
        if args.trace:
            os.makedirs(args.trace, exist_ok=True)
            slug = "".join(c if c.isalnum() else "_" for c in what).strip("_")
            prof.export_chrome_trace(os.path.join(args.trace, f"{slug}.json"))
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
