"""Elastic jobs (issue 18), three measurements:

    PYTHONPATH=$PWD mpirun --allow-run-as-root -np 2 \
        build/venv/bin/python benchmarks/elastic.py commit

Cost of `state.commit()` for an elastic job, against the fixed-world commit in the same run:
the fixed-world commit copies the variables to host memory; the elastic one also pickles them
into the rank's file in /dev/shm and asks (rank 0) / broadcasts whether the hosts changed.
Models: the digits MLP of the elastic example, and a ~25 M-parameter MLP.

    PYTHONPATH=$PWD build/venv/bin/python benchmarks/elastic.py cluster

Timings on a compose cluster: a worker added with `docker compose up --scale`, then a worker
killed, while the elastic Keras example trains (1 slot per worker). Prints, from the launcher's
output stamped as it arrives: the time from the fault to the driver starting the next
generation, and to its first epoch (training again), plus what was resumed.

    PYTHONPATH=$PWD build/torch-venv/bin/python benchmarks/elastic.py gloo --preload torch

On this host, `horovodrun --gloo` elastic jobs of 3 ranks (min 2) whose rank 2 is SIGKILLed
after a commit: the time from the kill to the first step of the next generation (training
again), with the survivors re-forming in their processes (the default over --gloo) and with
every rank relaunched (HOROVOD_ELASTIC_REFORM=relaunch), trials interleaved. Each rank first
imports --preload (a framework: what a relaunch imports again) and builds its state.
"""

import argparse
import importlib
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CMD = (
    "horovodrun --min-np 2 --max-np 3 "
    "--host-discovery-script 'python -m horovod.runner.cluster --discover' "
    "python /opt/horovod/examples/tensorflow2_keras_digits_elastic.py --epochs 30"
)


class Stamped:
    def __init__(self, cmd, env=None):
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def wait_for(self, pattern, after=0.0, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, line in list(self.lines):
                if t >= after and re.search(pattern, line):
                    return t, line
            time.sleep(0.05)
        raise TimeoutError(pattern)


def scenario(c, what, fault):
    job = Stamped(["docker", "exec", c.launcher, "sh", "-c", CMD])
    job.wait_for(r"^Epoch 4/")
    t0 = time.monotonic()
    fault()
    t_gen, _ = job.wait_for(r"elastic: generation 1: ", t0)
    t_resume, resumed = job.wait_for(r"resumed from commit", t0)
    t_epoch, _ = job.wait_for(r"^Epoch 1/", t_resume)
    rc = job.proc.wait(300)
    done = [line for _, line in job.lines if "ELASTIC DONE" in line]
    print(
        f"{what}: next generation started {t_gen - t0:.1f} s after, state resumed at "
        f"{t_resume - t0:.1f} s, training again (first epoch) at {t_epoch - t0:.1f} s; "
        f"rc={rc}; {resumed.split('] ', 1)[-1]}; {len(done)} ranks done, weights "
        f"{'identical' if len({d.split('weights=')[1] for d in done}) == 1 else 'DIFFER'}"
    )


def cluster_faults():
    from tests.support.compose import make_cluster  # PYTHONPATH=$PWD: the tests' helpers

    c = make_cluster(2, slots=1)
    try:
        scenario(
            c,
            "worker added (2 -> 3)",
            lambda: c.compose("up", "-d", "--wait", "--scale", "worker=3", "--no-recreate"),
        )
        scenario(
            c,
            "worker killed (3 -> 2)",
            lambda: subprocess.run(
                ["docker", "kill", c.worker(3)], check=True, capture_output=True
            ),
        )
    finally:
        c.down()


def model_of(widths):
    import keras

    layers = [keras.Input((widths[0],))]
    layers += [keras.layers.Dense(w) for w in widths[1:]]
    m = keras.Sequential(layers)
    m.compile(optimizer=keras.optimizers.SGD(momentum=0.9), loss="mse")
    m.optimizer.build(m.trainable_variables)
    return m


def timed(state, n):
    state.commit()  # warm
    start = time.perf_counter()
    for _ in range(n):
        state.commit()
    return (time.perf_counter() - start) / n


def commit_costs():
    # Imported here: the cluster measurement runs without TensorFlow.
    import horovod.tensorflow.keras as hvd
    from horovod.common import elastic_worker

    hvd.init()
    store = tempfile.mkdtemp(dir="/dev/shm")
    job = uuid.uuid4().hex[:8]
    for name, widths, n in [
        ("digits MLP", [64, 64, 10], 50),
        ("25M-parameter MLP", [2048, 4096, 4096], 5),
    ]:
        model = model_of(widths)
        params = model.count_params()
        state = hvd.elastic.KerasState(model, batch=0, epoch=0)
        os.environ.pop("HOROVOD_ELASTIC", None)
        fixed = timed(state, n)
        os.environ.update(
            HOROVOD_ELASTIC="1", HOROVOD_ELASTIC_JOB_ID=job, HOROVOD_ELASTIC_STORE=store
        )
        assert elastic_worker.active()
        elastic = timed(state, n)
        os.environ.pop("HOROVOD_ELASTIC")
        if hvd.rank() == 0:
            print(
                f"{name}: {params:,} parameters (+ momentum): commit fixed world "
                f"{fixed * 1e3:.2f} ms, elastic {elastic * 1e3:.2f} ms "
                f"(x{elastic / fixed:.1f}; +{(elastic - fixed) * 1e3:.2f} ms per commit)",
                flush=True,
            )
    os.system(f"rm -rf {store}")


def rank_program(args):
    """One rank of the `gloo` measurement's job: --preload, then steps of an allreduce each,
    a commit every 5, printing "STEP gen=G step=S" (G: the generation it runs in now)."""
    if args.preload:
        importlib.import_module(args.preload)
    import numpy as np

    import horovod.numpy as hvd
    from horovod.common.elastic import ObjectState, run_fn

    hvd.init()

    def note_pid():
        gen = os.environ.get("HOROVOD_ELASTIC_GENERATION")
        pathlib.Path(args.pid_dir, f"g{gen}-r{hvd.rank()}.pid").write_text(str(os.getpid()))

    note_pid()
    state = ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    state.register_reset_callbacks([note_pid])

    def train(state):
        while state.step < args.steps:
            hvd.allreduce(np.ones(1000), name="grad", op=hvd.Sum)
            state.step += 1
            gen = os.environ.get("HOROVOD_ELASTIC_GENERATION")
            print(f"STEP gen={gen} step={state.step}", flush=True)
            if state.step % 5 == 0:
                state.commit()
            time.sleep(0.05)

    run_fn(train, reset=lambda: None)(state)


def kill_to_training(mode, preload, steps):
    """One elastic job over --gloo: seconds from rank 2's SIGKILL (after a commit of
    generation 0) to the first step of generation 1, and the job's exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        hosts = pathlib.Path(tmp, "hosts")
        hosts.write_text("localhost:3\n")
        env = dict(os.environ, HOROVOD_ELASTIC_REFORM=mode, HOROVOD_ELASTIC_STORE=f"{tmp}/store")
        cmd = [sys.executable, "-m", "horovod.runner.launch", "--gloo", "--min-np", "2"]
        cmd += ["--host-discovery-script", f"cat {hosts}", sys.executable, __file__, "rank"]
        cmd += ["--steps", str(steps), "--pid-dir", tmp] + (
            ["--preload", preload] if preload else []
        )
        job = Stamped(cmd, env)
        job.wait_for(r"STEP gen=0 step=7")  # a commit (step 5) is behind every rank
        pid = int(pathlib.Path(tmp, "g0-r2.pid").read_text())
        hosts.write_text("localhost:2\n")
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        t_step, _ = job.wait_for(r"STEP gen=1 ", t0)
        rc = job.proc.wait(300)
        return t_step - t0, rc


def gloo_reform(args):
    times = {"process": [], "relaunch": []}
    for trial in range(args.trials):
        for mode in times:
            seconds, rc = kill_to_training(mode, args.preload, args.steps)
            times[mode].append(seconds)
            print(
                f"trial {trial + 1} {mode}: training again {seconds:.2f} s after the kill "
                f"(rc={rc})",
                flush=True,
            )
    inp, rel = (statistics.median(times[m]) for m in ("process", "relaunch"))
    print(
        f"median of {args.trials}: in process {inp:.2f} s, relaunch {rel:.2f} s "
        f"(preload: {args.preload or 'nothing'}); relaunch/in-process {rel / inp:.1f}x",
        flush=True,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["commit", "cluster", "gloo", "rank"])
    ap.add_argument("--preload", help="gloo: a module every rank imports first (torch)")
    ap.add_argument("--trials", type=int, default=3, help="gloo: trials of each (interleaved)")
    ap.add_argument("--steps", type=int, default=60, help="gloo/rank: steps of the job")
    ap.add_argument("--pid-dir", help="rank: where it notes its pid per generation")
    args = ap.parse_args()
    if args.what == "gloo":
        gloo_reform(args)
    elif args.what == "rank":
        rank_program(args)
    else:
        {"commit": commit_costs, "cluster": cluster_faults}[args.what]()


if __name__ == "__main__":
    main()
