"""horovod.spark.run on the compose Spark cluster (compose/compose.spark.yaml, 2 workers of 2
slots, with benchmarks/spark.compose.yaml: sshd beside the workers), in one run:

    python3 benchmarks/spark.py [--sizes 4K,1M,16M,64M] [--trials 3] [--runs 5]

1. bring-up: `docker compose up --wait` until both workers are registered with the master;
2. run() of a trivial fn on the warm cluster (a SparkSession whose executors are up), `--runs`
   times after one first run: the seconds from run() to fn starting on its last rank (and
   first), and the whole run(); the first run also starts the executors' Python workers;
3. allreduce across the 4 ranks (2 per worker, TCP over the compose network) inside Spark tasks
   and with `horovodrun --gloo` from the driver over ssh, on the same containers, the variants
   interleaved per trial; each trial is benchmarks/transports.py's worker (time per op of the
   slowest rank, bus bandwidth, the median 4 KiB latency); medians over the trials and the
   ratio spark/gloo of bus bandwidth (1.0: the same).
Without --in-driver it runs on the host (docker compose, the images: `make build/spark`) and
runs itself with --in-driver in the driver container, then takes the cluster down.
"""

import argparse
import io
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANKS = 4
PROJECT = "hvdsparkbench"


def compose(*args, env, timeout=300):
    files = ["-f", "compose/compose.spark.yaml", "-f", "benchmarks/spark.compose.yaml"]
    cmd = ["docker", "compose", *files, "-p", PROJECT, *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, timeout=timeout, check=True)


def on_host(args):
    tag = os.environ.get("IMAGE_TAG", "latest")
    env = dict(os.environ, HOROVOD_IMAGE_TAG=tag, HOROVOD_SPARK_UI_PORT="")
    env.update(HOROVOD_SPARK_WORKERS="2", HOROVOD_SPARK_CORES="2")
    compose("down", "-v", "-t", "1", env=env)
    try:
        start = time.monotonic()
        compose("up", "-d", "--wait", "--scale", "spark-worker=2", env=env)
        print(
            f"== bring-up: 2 workers registered, driver ready in {time.monotonic() - start:.1f} s"
        )
        inner = ["python", "/bench/spark.py", "--in-driver", "--sizes", args.sizes]
        inner += ["--trials", str(args.trials), "--runs", str(args.runs)]
        p = subprocess.run(["docker", "exec", f"{PROJECT}-driver-1", *inner], timeout=1800)
        return p.returncode
    finally:
        compose("down", "-v", "-t", "1", env=env)


def fn_start():
    return time.time()


def bench_in_task(sizes, latency_ops):
    sys.path.insert(0, "/bench")
    import transports

    transports.worker(sizes, latency_ops)  # rank 0 prints RESULT {...}


def run_timings(runs):
    import horovod.spark

    rows = []
    for i in range(runs + 1):
        t0 = time.time()
        starts = horovod.spark.run(fn_start, num_proc=RANKS)
        t1 = time.time()
        rows.append((min(starts) - t0, max(starts) - t0, t1 - t0))
        label = "first run" if i == 0 else f"warm run {i}"
        print(
            f"{label}: fn started on its first rank {rows[-1][0]:.2f} s, its last "
            f"{rows[-1][1]:.2f} s after run(); run() took {rows[-1][2]:.2f} s"
        )
    warm = rows[1:]
    print(
        f"== warm cluster, median of {runs}: run() to fn on every rank "
        f"{statistics.median(r[1] for r in warm):.2f} s, whole run() "
        f"{statistics.median(r[2] for r in warm):.2f} s (target < 10 s)"
    )


def spark_trial(sizes, latency_ops):
    from transports import result_of

    import horovod.spark

    out = io.StringIO()
    horovod.spark.run(
        bench_in_task, args=(sizes, latency_ops), num_proc=RANKS, stdout=out,
        env={"HOROVOD_SUMMARY": "0"},
    )  # fmt: skip
    return result_of(out.getvalue(), "spark")


def gloo_trial(sizes, latency_ops):
    from transports import result_of

    cmd = ["horovodrun", "--gloo", "-np", str(RANKS), "python", "/bench/transports.py"]
    cmd += ["--worker", "--sizes", ",".join(map(str, sizes)), "--latency-ops", str(latency_ops)]
    env = dict(os.environ, HOROVOD_SUMMARY="0")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return result_of(p.stdout, f"horovodrun --gloo (rc={p.returncode}, stderr: {p.stderr[-2000:]})")


def run_bandwidth(sizes, trials, latency_ops=500):
    runs = {"spark": [], "gloo": []}
    for t in range(trials):
        runs["spark"].append(spark_trial(sizes, latency_ops))
        runs["gloo"].append(gloo_trial(sizes, latency_ops))
        print(f"trial {t + 1}/{trials} done", flush=True)
    n = RANKS
    print(f"== allreduce, {n} ranks on 2 workers x 2: inside Spark tasks vs horovodrun --gloo")
    print(f"{'size':>9} | {'spark us':>9} {'GB/s':>7} | {'gloo us':>9} {'GB/s':>7} | spark/gloo")
    for nbytes in sizes:
        med = {v: statistics.median(r["sizes"][str(nbytes)] for r in runs[v]) for v in runs}
        bw = {v: nbytes * 2 * (n - 1) / n / med[v] / 1e9 for v in runs}
        print(
            f"{nbytes:>9} | {med['spark'] * 1e6:>9.0f} {bw['spark']:>7.3f} | "
            f"{med['gloo'] * 1e6:>9.0f} {bw['gloo']:>7.3f} | {bw['spark'] / bw['gloo']:>10.2f}"
        )
    lat = {v: statistics.median(r["latency_4k"] for r in runs[v]) * 1e6 for v in runs}
    print(
        f"4 KiB latency (median of single ops): spark {lat['spark']:.0f} us, "
        f"gloo {lat['gloo']:.0f} us; spark/gloo {lat['spark'] / lat['gloo']:.2f}"
    )


def in_driver(args):
    sys.path.insert(0, "/bench")
    from pyspark.sql import SparkSession
    from transports import parse_size

    from horovod.spark.runner import task_slots

    spark = SparkSession.builder.master(os.environ["SPARK_MASTER_URL"])
    spark = spark.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        deadline = time.monotonic() + 120
        while task_slots(spark.sparkContext) < RANKS:
            if time.monotonic() > deadline:
                raise SystemExit(f"fewer than {RANKS} task slots after 120 s")
            time.sleep(0.2)
        run_timings(args.runs)
        run_bandwidth([parse_size(s) for s in args.sizes.split(",")], args.trials)
    finally:
        spark.stop()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--in-driver", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--sizes", default="4K,1M,16M,64M")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--runs", type=int, default=5, help="warm runs of the trivial fn")
    args = p.parse_args()
    return in_driver(args) if args.in_driver else on_host(args)


if __name__ == "__main__":
    sys.exit(main())
