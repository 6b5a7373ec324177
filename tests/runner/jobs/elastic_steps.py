"""An elastic job on horovod.numpy for the driver's tests: `steps` steps, each an allreduce
and one increment of the state's `w` (so a final w equal to `steps` means every step counted
exactly once after the rollbacks); commits every `--commit-every` steps. Prints one line per
step and a DONE line per rank (with its pid: a process that re-formed in place keeps it);
`--pid-dir` gets a file per rank and generation (its pid) for the test to kill, written at
start and, in a process that re-forms in place (horovodrun --gloo), at each reset."""

import argparse
import os
import pickle
import time

import numpy as np

import horovod.numpy as hvd
from horovod.common.elastic import ObjectState, run_fn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--commit-every", type=int, default=5)
p.add_argument("--delay", type=float, default=0.1)
p.add_argument("--pid-dir")
args = p.parse_args()


def gen():
    """This process's generation now (one that re-forms in place moves on to the next)."""
    return os.environ.get("HOROVOD_ELASTIC_GENERATION", "-")


def write_pid():
    if args.pid_dir:
        with open(os.path.join(args.pid_dir, f"g{gen()}-r{hvd.rank()}.pid"), "w") as f:
            f.write(str(os.getpid()))


hvd.init()
write_pid()


def bcast_object(obj):
    data = np.frombuffer(pickle.dumps(obj), np.uint8) if hvd.rank() == 0 else None
    n = hvd.broadcast(np.array([0 if data is None else len(data)]), 0, name="obj.size")[0]
    buf = hvd.broadcast(data if data is not None else np.empty(n, np.uint8), 0, name="obj")
    return pickle.loads(buf.tobytes())


state = ObjectState(bcast_object, hvd.rank, step=0, w=0.0)
state.register_reset_callbacks(
    [lambda: print(f"RESET gen={gen()} size={hvd.size()}", flush=True), write_pid]
)


def train(state):
    while state.step < args.steps:
        total = hvd.allreduce(np.ones(1000), name="grad", op=hvd.Sum)
        assert total[0] == hvd.size(), total[0]
        state.w += 1.0
        state.step += 1
        print(f"STEP gen={gen()} rank={hvd.rank()} step={state.step}", flush=True)
        if state.step % args.commit_every == 0:
            state.commit()
        time.sleep(args.delay)


run_fn(train, reset=lambda: None)(state)
print(
    f"DONE gen={gen()} rank={hvd.rank()} size={hvd.size()} step={state.step} w={state.w} "
    f"pid={os.getpid()}",
    flush=True,
)
