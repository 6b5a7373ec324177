"""A stall shutdown that must end the job, and a peer's slow local step that must not
(test_faults.py). The last argument of each is a marker the test finds the processes by."""

import sys
import time

import numpy as np

import horovod.numpy as hvd
from horovod.common.exceptions import HorovodShutdownError
from tests.support.scenario import expect_error


def sc_stall_exit():
    """Ranks but 0 are stuck outside Horovod (asleep); rank 0 submits an op, which the stall
    shutdown fails. argv[2]: "exit" (rank 0 then ends, its shutdown() at exit) or "ignore"
    (rank 0 catches the error and sleeps too: only the engine's own bound ends the job)."""
    mode = sys.argv[2]
    if hvd.rank() != 0:
        print(f"ASLEEP rank={hvd.rank()}", flush=True)
        time.sleep(600)  # never submits: stuck outside Horovod
        raise AssertionError("the job outlived its stall shutdown by 10 minutes")
    expect_error(
        lambda: hvd.allreduce(np.ones(4), name="stall/x"),
        HorovodShutdownError,
        "stall shutdown",
        "tensor 'stall/x'",
        "has waited",
    )
    if mode == "ignore":
        print("IGNORING rank=0", flush=True)
        time.sleep(600)
        raise AssertionError("the job outlived its stall shutdown by 10 minutes")


def sc_slow_local_step():
    """Rank 0 gathers argv[2] MiB, the others one row: rank 0 copies its segment into fresh
    output pages (seconds here) while the others wait for it. That is work, not a stall."""
    from mpi4py import MPI

    r, n = hvd.rank(), hvd.size()
    rows = int(sys.argv[2]) << 20 if r == 0 else 1
    x = np.full((rows, 1), r + 1, np.int8)
    # Outside Horovod: an op submitted while rank 0 still fills x would wait for it in
    # negotiation, which the stall inspector rightly reports.
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    got = hvd.allgather(x, name="slow/local")
    elapsed = time.perf_counter() - start
    big = int(sys.argv[2]) << 20
    assert got.shape == (big + n - 1, 1), got.shape
    assert (got[:big] == 1).all() and (got[big:, 0] == np.arange(2, n + 1)).all()
    print(f"ELAPSED rank={r} {elapsed:.3f}", flush=True)
