"""The timeline and the stall inspector (test_observability.py)."""

import json
import os
import time

import numpy as np

import horovod.numpy as hvd
from tests.support.scenario import expect_error


def sc_timeline():
    r = hvd.rank()
    for _step in range(3):
        hvd.grouped_allreduce([np.ones(100), np.ones(50)], op=hvd.Sum, name="tl")
        hvd.allreduce(np.ones(10), name="tl/single")
        hvd.allreduce(np.ones(100000), name="tl/big")  # above the direct-exchange size: ring
        # Fused and above it: the ring runs over the two tensors, no fusion-buffer copies.
        hvd.grouped_allreduce([np.ones(60000), np.ones(50000)], op=hvd.Sum, name="tl/fring")
    hvd.broadcast(np.ones(4), root_rank=0, name="tl/bcast")
    if r == 0:
        time.sleep(0.3)


def sc_timeline_short():
    """A job of one allreduce: it ends within about 0.1 s of init."""
    hvd.allreduce(np.ones(10), name="tl/short")


def read_timeline_while_running(path):
    """The events of a timeline that is still being written: the file holds whole events and
    lacks only the closing bracket. Caught mid-flush (a chunk larger than stdio's buffer lands in
    two writes) or before the first one, it reads as no events; the caller reads again."""
    text = open(path).read().rstrip()
    try:
        return json.loads(text if text.endswith("]") else text + "\n]")
    except json.JSONDecodeError:
        return []


def sc_timeline_live():
    """Rank 0 reads its timeline while the job runs: an op that ran is in the file within
    about 0.1 s (the writer flushes every 100 ms; a loaded machine gets 10 s)."""
    hvd.allreduce(np.ones(10), name="tl/live")
    if hvd.rank() == 0:
        deadline = time.monotonic() + 10
        while True:
            time.sleep(0.1)
            events = read_timeline_while_running(os.environ["HOROVOD_TIMELINE"])
            rows = {e["pid"] for e in events if e.get("args", {}).get("name") == "tl/live"}
            spans = [e["name"] for e in events if e.get("pid") in rows and e["ph"] == "B"]
            if "ALLREDUCE" in spans or time.monotonic() > deadline:
                break
        assert "ALLREDUCE" in spans, spans
    hvd.allreduce(np.ones(10), name="tl/after")  # the others wait for rank 0's check


def sc_stall_warning():
    """Rank 1 submits late, first an uncached tensor and then a cached one."""
    r = hvd.rank()
    hvd.allreduce(np.ones(2), name="stall/cached")
    for name in ("stall/uncached", "stall/cached"):
        if r == 1:
            time.sleep(3.5)
        hvd.allreduce(np.ones(2), name=name)


def sc_stall_shutdown():
    """Rank 1 is away past the stall shutdown: the pending op fails on rank 0, and the late op
    of rank 1, once awake, fails too. The job then ends with MPI_Abort (a finalize would wait
    for any rank still away), so each rank says it got the error before that."""
    r = hvd.rank()
    if r == 1:
        time.sleep(5)  # never submits 'stall/never' in time
        expect_error(
            lambda: hvd.allreduce(np.ones(2), name="stall/late"), hvd.HorovodShutdownError, "stall"
        )
    else:
        expect_error(
            lambda: hvd.allreduce(np.ones(2), name="stall/never"),
            hvd.HorovodShutdownError,
            "stall/never",
            "[1]",
        )
    print(f"GOT STALL ERROR rank={r}", flush=True)
    if r != 1:
        time.sleep(5)  # rank 1 wakes meanwhile; the first rank to end aborts the job
