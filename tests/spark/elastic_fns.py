"""The functions tests/spark/test_elastic.py hands to horovod.spark.run_elastic and run (a module
the executors import by reference, as rank_fns.py)."""

import os
import pickle
import signal
import time


def _ancestor(name):
    """The pid of this process' nearest ancestor whose command is `name` (the executor's JVM:
    rank child -> Python worker -> pyspark daemon -> java)."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip() == name:
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return None


def _write(path, text):
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)


def _state(hvd, **values):
    import numpy as np

    from horovod.common.elastic import ObjectState

    def bcast_object(obj):
        data = np.frombuffer(pickle.dumps(obj), np.uint8) if hvd.rank() == 0 else None
        n = hvd.broadcast(np.array([0 if data is None else len(data)]), 0, name="obj.size")[0]
        buf = hvd.broadcast(data if data is not None else np.empty(n, np.uint8), 0, name="obj")
        return pickle.loads(buf.tobytes())

    return ObjectState(bcast_object, hvd.rank, **values)


def elastic_steps(steps, pid_dir, delay=0.2, until_sizes=None, cap=None):
    """Steps of an allreduce and one increment of the state's `w`, committing after each (so a
    final w equal to step means every step counted once across the rollbacks). `sizes` keeps
    the world sizes the job went through. With `until_sizes` (e.g. [4, 2, 4]) the job goes on
    past `steps` until its sizes went through that sequence, at most `cap` steps. Each rank
    writes `pid_dir/g<gen>-r<rank>` ("pid executor-pid"); rank 0 writes `pid_dir/progress`
    ("gen step") after each commit and prints `STEP gen=G step=S t=<time>`."""
    import numpy as np

    import horovod.numpy as hvd
    from horovod.common.elastic import run_fn

    hvd.init()
    gen = int(os.environ.get("HOROVOD_ELASTIC_GENERATION", "0"))
    _write(os.path.join(pid_dir, f"g{gen}-r{hvd.rank()}"), f"{os.getpid()} {_ancestor('java')}")
    state = _state(hvd, step=0, w=0.0, sizes=[])

    def more(state):
        if state.step < steps:
            return True
        return (
            bool(until_sizes)
            and state.sizes[-len(until_sizes) :] != until_sizes
            and (cap is None or state.step < cap)
        )

    def train(state):
        while more(state):
            total = hvd.allreduce(np.ones(4), name="grad", op=hvd.Sum)
            assert total[0] == hvd.size(), total[0]
            state.w += 1.0
            state.step += 1
            if not state.sizes or state.sizes[-1] != hvd.size():
                state.sizes = state.sizes + [hvd.size()]
            if hvd.rank() == 0:
                print(f"STEP gen={gen} step={state.step} t={time.time():.3f}", flush=True)
            state.commit()
            if hvd.rank() == 0:
                _write(os.path.join(pid_dir, "progress"), f"{gen} {state.step}")
            time.sleep(delay)

    run_fn(train, reset=lambda: None)(state)
    view = {"rank": hvd.rank(), "size": hvd.size(), "gen": gen, "step": state.step}
    view.update(w=state.w, sizes=state.sizes, gpus=os.environ.get("CUDA_VISIBLE_DEVICES"))
    return view


def kill_self_in_first_generation(pid_dir):
    """Rank 1 of generation 0 SIGKILLs its own process after the first commit (a rank lost,
    its executor alive); later generations run 3 steps and return their rank."""
    import threading

    gen = int(os.environ.get("HOROVOD_ELASTIC_GENERATION", "0"))
    if gen == 0 and os.environ.get("HOROVOD_RANK") == "1":

        def kill_at_first_commit():
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(pid_dir, "progress")):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill_at_first_commit, daemon=True).start()
    return elastic_steps(3, pid_dir, delay=0.05 if gen else 0.5)


def raise_on_rank_1():
    """fn's own error under run_elastic: rank 1 raises ValueError at once."""
    import horovod.numpy as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("an error of fn's own on rank 1")
    hvd.allreduce(__import__("numpy").ones(1), name="wait")
    return hvd.rank()


def sleep_in_allreduce(pid_dir, seconds):
    """For horovod.spark.run: each rank writes `pid_dir/r<rank>` ("pid executor-pid"), then
    all allreduce every 0.1 s for `seconds`."""
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    _write(os.path.join(pid_dir, f"r{hvd.rank()}"), f"{os.getpid()} {_ancestor('java')}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        hvd.allreduce(np.ones(4), name="tick")
        time.sleep(0.1)
    return hvd.rank()


def gpu_view():
    """The rank's GPU variables and local rank (horovod.spark.run with GPU resources)."""
    from horovod.spark.task import get_available_devices

    return {
        "rank": int(os.environ["HOROVOD_RANK"]),
        "local_rank": int(os.environ["HOROVOD_LOCAL_RANK"]),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "devices": get_available_devices(),
        "addresses": os.environ.get("HOROVOD_SPARK_GPU_ADDRESSES"),
    }
