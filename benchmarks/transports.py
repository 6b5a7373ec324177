"""Allreduce through the engine over its two transports, and over another build, in one run.

    python benchmarks/transports.py [--np 2] [--hosts w1:2,w2:2] [--sizes 4K,16M,64M]
        [--trials 5] [--old-tree PATH] [--env VAR=value ...]

Each trial launches the same worker (this file, --worker) once per variant, in turn, so that a
noisy moment on a shared machine hits every variant alike:
  mpi   horovodrun (mpirun) with HOROVOD_TRANSPORT=mpi: Open MPI's shared memory between ranks of
        one host, TCP between hosts;
  tcp   horovodrun --gloo: the engine's TCP transport (sockets from its rendezvous, no mpirun);
  old   with --old-tree PATH: mpirun, importing horovod from PATH (an earlier build), to show that
        the transport seam costs the MPI path nothing;
  sock  with --socket: the TCP transport with HOROVOD_TCP_SINGLE_COPY=0 (ranks of one machine
        move every byte through their Unix socket), to show what single copy gains.
A worker times `iters` back-to-back hvd.allreduce(x, op=Sum, out=y) per size after a warm-up (the
slowest rank's time counts), and the median of single 4 KiB allreduces (the latency). Printed per
size: each variant's time and bus bandwidth (bytes * 2(n-1)/n / time), the median over trials,
and the ratios tcp/mpi, mpi/old and tcp/sock of bus bandwidth (> 1: the first is faster); the
latency ratios of time (< 1: the first is faster).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    text = text.strip().upper().rstrip("B").rstrip("I")
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def worker(sizes, latency_ops):
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    n = hvd.size()

    def slowest(seconds):
        return float(hvd.allreduce(np.array([seconds]), op=hvd.Max, name="bench.max")[0])

    # An earlier build (variant old) has no transport(): it is MPI.
    out = {"transport": getattr(hvd, "transport", lambda: "mpi")(), "size": n, "sizes": {}}
    for nbytes in sizes:
        x = np.full(nbytes // 4, hvd.rank() + 1, np.float32)
        y = np.empty_like(x)
        name = f"bench.{nbytes}"
        iters = max(5, min(200, (1 << 30) // max(nbytes, 1) // 4))
        for _ in range(2):
            hvd.allreduce(x, op=hvd.Sum, name=name, out=y)
        hvd.allreduce(np.zeros(1), name="bench.barrier")
        t0 = time.perf_counter()
        for _ in range(iters):
            hvd.allreduce(x, op=hvd.Sum, name=name, out=y)
        per_op = slowest((time.perf_counter() - t0) / iters)
        assert y[0] == n * (n + 1) / 2, y[0]
        out["sizes"][str(nbytes)] = per_op
    x = np.ones(1024, np.float32)
    y = np.empty_like(x)
    for _ in range(200):
        hvd.allreduce(x, op=hvd.Sum, name="bench.lat", out=y)
    ts = []
    for _ in range(latency_ops):
        t0 = time.perf_counter()
        hvd.allreduce(x, op=hvd.Sum, name="bench.lat", out=y)
        ts.append(time.perf_counter() - t0)
    out["latency_4k"] = slowest(statistics.median(ts))
    if hvd.rank() == 0:
        print("RESULT " + json.dumps(out), flush=True)


def result_of(text, what):
    """The RESULT that worker() printed on rank 0, found in a job's output `text`; SystemExit
    naming `what` (the job, its exit code and stderr) when there is none."""
    for line in text.splitlines():
        if "RESULT " in line:
            return json.loads(line.split("RESULT ", 1)[1])
    raise SystemExit(f"{what}: no RESULT line in:\n{text[-3000:]}")


def launch(variant, args, tree):
    cmd = [sys.executable, "-m", "horovod.runner.launch", "-np", str(args.np)]
    if args.hosts:
        cmd += ["-H", args.hosts]
    if variant in ("tcp", "sock"):
        cmd.append("--gloo")
    cmd += [sys.executable, os.path.abspath(__file__), "--worker", "--sizes", args.sizes]
    cmd += ["--latency-ops", str(args.latency_ops)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HOROVOD_TRANSPORT"] = "tcp" if variant in ("tcp", "sock") else "mpi"
    if variant == "sock":
        env["HOROVOD_TCP_SINGLE_COPY"] = "0"
    env.setdefault("HOROVOD_SUMMARY", "0")
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    if variant == "old":  # an earlier build may not know the knob: let it choose (mpirun: MPI)
        env.pop("HOROVOD_TRANSPORT")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    return result_of(p.stdout, f"{variant} (rc={p.returncode}, stderr: {p.stderr[-3000:]})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--hosts", help="horovodrun -H (default: this host)")
    p.add_argument("--sizes", default="4K,16M,64M")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--latency-ops", type=int, default=2000)
    p.add_argument("--old-tree", help="a tree whose horovod/ holds an earlier build (variant old)")
    p.add_argument("--socket", action="store_true", help="add variant sock (no single copy)")
    p.add_argument("--env", action="append", default=[], help="VAR=value for the ranks")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.worker:
        return worker(sizes, args.latency_ops)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    variants = {"mpi": here, "tcp": here}
    if args.old_tree:
        variants["old"] = os.path.abspath(args.old_tree)
    if args.socket:
        variants["sock"] = here
    runs = {v: [] for v in variants}
    for t in range(args.trials):
        for v, tree in variants.items():
            runs[v].append(launch(v, args, tree))
        print(f"trial {t + 1}/{args.trials} done", file=sys.stderr, flush=True)
    n = args.np
    got = {v: runs[v][0]["transport"] if v != "old" else "mpi" for v in variants}
    extra = [r for r in ("old", "sock") if r in variants]
    names = {"old": "mpi/old", "sock": "tcp/sock"}
    where = args.hosts or (
        "$HOROVOD_HOSTFILE" if os.environ.get("HOROVOD_HOSTFILE") else "this host"
    )
    print(
        f"== {n} ranks on {where}; transports: {got}; "
        f"{args.trials} trials, medians; env {args.env or '-'}"
    )
    head = " ".join(f"{v + ' us':>10} {v + ' GB/s':>9}" for v in variants)
    print(f"{'size':>8} | {head} | tcp/mpi" + "".join(f" {names[r]}" for r in extra))
    for nbytes in sizes:
        med = {v: statistics.median(r["sizes"][str(nbytes)] for r in runs[v]) for v in variants}
        bw = {v: nbytes * 2 * (n - 1) / n / med[v] / 1e9 for v in variants}
        cells = " ".join(f"{med[v] * 1e6:>10.0f} {bw[v]:>9.3f}" for v in variants)
        ratios = f"{bw['tcp'] / bw['mpi']:>7.2f}"
        if "old" in variants:
            ratios += f" {bw['mpi'] / bw['old']:>7.2f}"
        if "sock" in variants:
            ratios += f" {bw['tcp'] / bw['sock']:>8.2f}"
        print(f"{nbytes:>8} | {cells} | {ratios}")
    lat = {v: statistics.median(r["latency_4k"] for r in runs[v]) for v in variants}
    print(
        "4 KiB latency (median of single ops, us): "
        + ", ".join(f"{v} {lat[v] * 1e6:.1f}" for v in variants)
        + f"; tcp/mpi {lat['tcp'] / lat['mpi']:.2f}"
        + (f"; mpi/old {lat['mpi'] / lat['old']:.2f}" if "old" in variants else "")
        + (f"; tcp/sock {lat['tcp'] / lat['sock']:.2f}" if "sock" in variants else "")
    )


if __name__ == "__main__":
    sys.exit(main())
