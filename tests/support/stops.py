"""Rank-side helpers of the tests that stop a rank inside a collective (SIGSTOP), for the
watchdog's and the roll call's reports."""

import os
import signal
import time


def stop_once_the_ring_runs(x, n, bound_s=60):
    """Stops this process (SIGSTOP) once the ring allreduce just submitted on `x` (all ones, `n`
    ranks) certainly runs: it reduces into x in place, so the first partial sums show in a sample
    of x. A fixed sleep raced a slow peer's enqueue on a loaded machine, and the stop then landed
    in the negotiation round instead."""
    sample = x[:: 1 << 16]
    deadline = time.monotonic() + bound_s
    while (sample == n).all():
        assert time.monotonic() < deadline, "the ring never started on this rank"
    os.kill(os.getpid(), signal.SIGSTOP)
