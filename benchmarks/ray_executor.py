"""horovod.ray on a Ray cluster: RayExecutor's start() and a trivial run(), and allreduce inside
Ray actors against horovodrun's ranks on the same Ray worker containers, in one run. (Not
ray.py: a script's folder comes first on sys.path, and `import ray` would find it.)

    benchmarks/ray_cluster.sh [--sizes 1M,16M,64M] [--trials 3]     (brings the cluster up)
    python /bench/ray_executor.py [--workers 4] ...                  (on the head of a cluster)

Runs as the driver on a Ray node (ray.init(address="auto")):
  1. start(): RayExecutor(num_workers=N).start() timed, then a trivial run() (a function that
     returns 1), three runs; then shutdown() and a second start() (Ray's worker pool is warm);
  2. allreduce: the worker of benchmarks/transports.py (iters back-to-back
     hvd.allreduce(x, op=Sum, out=y) per size, the slowest rank's time) in three variants,
     interleaved trial by trial so a noisy moment hits each alike:
       ray   the N actors of the executor (the engine's TCP transport, rendezvous on the driver)
       tcp   horovodrun --gloo -np N -H <the Ray workers' IPs>: the same transport, no Ray
       mpi   horovodrun -np N -H ...: Open MPI (shared memory within a node, TCP across)
     Printed per size: each variant's median time and bus bandwidth (bytes * 2(N-1)/N / time)
     and the ratios ray/tcp and ray/mpi of bus bandwidth (1.00: the same; > 1: Ray faster).
horovodrun needs ssh from the head to the Ray workers (benchmarks/ray_cluster.sh sets it up).
"""

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from transports import parse_size, result_of  # noqa: E402


def transports_worker(bench_dir, sizes, latency_ops):
    """In an actor: benchmarks/transports.py's worker; rank 0's RESULT (the slowest rank's
    times), None on the other ranks."""
    sys.path.insert(0, bench_dir)
    import transports

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        transports.worker(sizes, latency_ops)
    for line in out.getvalue().splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return None


def one():
    return 1


def ray_hosts(workers):
    """horovodrun's -H for the Ray nodes that offer CPUs (the head offers none): 'ip:slots,...'
    with the workers spread as num_workers PACKs them, 2 per node of 2 CPUs."""
    import ray

    nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    slots = [(n["NodeManagerAddress"], int(n["Resources"]["CPU"])) for n in nodes]
    assert sum(s for _, s in slots) >= workers, f"{workers} workers, Ray offers {slots}"
    return ",".join(f"{ip}:{s}" for ip, s in sorted(slots))


def horovodrun(variant, args, hosts):
    cmd = ["horovodrun", "-np", str(args.workers), "-H", hosts]
    if variant == "tcp":
        cmd.append("--gloo")
    cmd += ["python", os.path.join(BENCH, "transports.py"), "--worker", "--sizes", args.sizes]
    cmd += ["--latency-ops", str(args.latency_ops)]
    env = dict(os.environ, HOROVOD_TRANSPORT=variant, HOROVOD_SUMMARY="0")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    return result_of(p.stdout, f"{variant} (rc={p.returncode}, stderr: {p.stderr[-3000:]})")


def timed(call):
    t0 = time.perf_counter()
    value = call()
    return time.perf_counter() - t0, value


def start_figures(ray_executor, settings, n):
    """start() twice (a fresh executor each time) and three trivial runs after each."""
    for attempt in ("first", "second"):
        ex = ray_executor(settings, num_workers=n)
        start_s, _ = timed(ex.start)
        runs = [timed(lambda: ex.run(one))[0] for _ in range(3)]
        ex.shutdown()
        print(
            f"start(), {n} workers, {attempt}: {start_s:.2f} s; trivial run(): "
            + ", ".join(f"{r * 1e3:.0f} ms" for r in runs),
            flush=True,
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--sizes", default="1M,16M,64M")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--latency-ops", type=int, default=500)
    p.add_argument("--variants", default="ray,tcp,mpi")
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()
    import ray

    from horovod.ray import RayExecutor

    ray.init(address="auto", log_to_driver=False)
    n, sizes = args.workers, [parse_size(s) for s in args.sizes.split(",")]
    settings = RayExecutor.create_settings(timeout_s=60)
    print(
        f"== Ray {ray.__version__}, {len(ray.nodes())} nodes, "
        f"{ray.cluster_resources().get('CPU'):g} CPUs",
        flush=True,
    )
    start_figures(RayExecutor, settings, n)

    variants = args.variants.split(",")
    hosts = ray_hosts(n)
    ex = RayExecutor(settings, num_workers=n)
    ex.start()
    runs = {v: [] for v in variants}
    try:
        for t in range(args.trials):
            for v in variants:
                if v == "ray":
                    runs[v].append(
                        ex.run(transports_worker, args=[BENCH, sizes, args.latency_ops])[0]
                    )
                else:
                    runs[v].append(horovodrun(v, args, hosts))
            print(f"trial {t + 1}/{args.trials} done", file=sys.stderr, flush=True)
    finally:
        ex.shutdown()
    print(f"== allreduce, {n} ranks on {hosts} (Ray workers); {args.trials} trials, medians")
    head = " ".join(f"{v + ' us':>10} {v + ' GB/s':>9}" for v in variants)
    others = [v for v in variants if v != "ray"]
    print(f"{'size':>8} | {head} |" + "".join(f" {'ray/' + v:>8}" for v in others))
    for nbytes in sizes:
        med = {v: statistics.median(r["sizes"][str(nbytes)] for r in runs[v]) for v in variants}
        bw = {v: nbytes * 2 * (n - 1) / n / med[v] / 1e9 for v in variants}
        cells = " ".join(f"{med[v] * 1e6:>10.0f} {bw[v]:>9.3f}" for v in variants)
        ratios = "".join(f" {bw['ray'] / bw[v]:>8.2f}" for v in others) if "ray" in bw else ""
        print(f"{nbytes:>8} | {cells} |{ratios}")
    lat = {v: statistics.median(r["latency_4k"] for r in runs[v]) for v in variants}
    print(
        "4 KiB latency (median of single ops, us): "
        + ", ".join(f"{v} {lat[v] * 1e6:.1f}" for v in variants)
    )


if __name__ == "__main__":
    sys.exit(main())
