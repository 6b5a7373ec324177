"""What the tests of the launchers that run a function on every rank (horovod.spark,
horovod.ray) share: a call bounded in time, and the function that reports a rank's view."""

import os
import threading

import pytest


def bounded(call, *args, limit, on_timeout=None, **kwargs):
    """call(*args, **kwargs) in a thread: its result, or its exception re-raised. One still going
    after `limit` seconds fails the test, after on_timeout() (which should make the call return,
    e.g. by cancelling its Spark jobs) and up to 30 s more for it to end."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call(*args, **kwargs)
        except BaseException as e:  # re-raised in the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        if on_timeout is not None:
            on_timeout()
            thread.join(30)
        pytest.fail(f"{getattr(call, '__qualname__', call)} did not return within {limit} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def rank_view(tag, shutdown=False):
    """Runs on a rank: its view of the job and an allreduce (Sum) of [rank, rank + 1, rank + 2]
    (as floats); with shutdown=True the engine is shut down before returning."""
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    total = hvd.allreduce(np.arange(3, dtype=np.float64) + hvd.rank(), op=hvd.Sum, name="view")
    view = {
        "tag": tag,
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(),
        "env_rank": int(os.environ["HOROVOD_RANK"]),
        "transport": hvd.transport(),
        "sum": total.tolist(),
        "pid": os.getpid(),
    }
    if shutdown:
        hvd.shutdown()
    return view
