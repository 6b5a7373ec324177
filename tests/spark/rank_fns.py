"""The functions the tests hand to horovod.spark.run. A module of their own, importable by the
executors (PYTHONPATH holds the tree), so that they are pickled by reference and import only
what they use, inside the rank."""

import os
import subprocess
import sys
import time


def identity_and_sum(tag):
    """The rank's view of the job, and an allreduce (Sum) of [rank, rank + 1, rank + 2]."""
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    total = hvd.allreduce(np.arange(3, dtype=np.float64) + hvd.rank(), op=hvd.Sum, name="sum")
    out = {
        "tag": tag,
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(),
        "sum": [int(v) for v in total],
        "pid": os.getpid(),
    }
    hvd.shutdown()
    return out


def chatty(lines):
    """Prints `lines` numbered lines on stdout and one on stderr; returns the rank."""
    rank = int(os.environ["HOROVOD_RANK"])
    for i in range(lines):
        print(f"hello {i} from rank {rank}")
    print(f"to stderr from rank {rank}", file=sys.stderr)
    return rank


def fail_on_rank_1(pid_dir, wait_s):
    """Rank 0 starts a grandchild (sleep) and records both pids in pid_dir, then waits in an
    allreduce that rank 1 never joins; rank 1 raises ValueError once rank 0's pids are there."""
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    if hvd.rank() == 0:
        sleeper = subprocess.Popen(["sleep", str(wait_s)])
        with open(os.path.join(pid_dir, "pids.part"), "w") as f:
            f.write(f"{os.getpid()} {sleeper.pid}")
        os.replace(os.path.join(pid_dir, "pids.part"), os.path.join(pid_dir, "pids"))
        time.sleep(wait_s)  # the driver must stop this rank
        hvd.allreduce(np.zeros(1), name="never")
        return "rank 0 was not stopped"
    deadline = time.monotonic() + wait_s
    while not os.path.exists(os.path.join(pid_dir, "pids")) and time.monotonic() < deadline:
        time.sleep(0.1)
    raise ValueError("boom on purpose from rank 1")


def exit_on_rank_1(code):
    """Rank 1 leaves with os._exit(code) (no result); the others return their rank."""
    rank = int(os.environ["HOROVOD_RANK"])
    if rank == 1:
        os._exit(code)
    return rank


def lock_result():
    """A result that cannot be pickled."""
    import threading

    return threading.Lock()
