"""The rank side of the TCP fault tests (test_tcp_faults.py): `python tcp_fault_jobs.py JOB`,
started as plain processes with a TCP launcher's variables (torchrun's or Gloo's). Each job
prints what its rank saw on stdout, one line each, so that the test can assert on every rank:

  init   init, one allreduce, shutdown: "READY rank=<r>", or, if init fails,
         "INIT ERROR <ExceptionType>: <message>" and exit 3 (the world's rank is unknown then).
  killed rank 1 SIGKILLs itself after the first allreduce; the others allreduce until they get
         the error: "ERROR rank=<r> after <s> s <ExceptionType>: <message>", exit 0.
  steady init, then allreduces of a few sizes for about argv[2] seconds (until a rank's time is
         up: the ranks agree on it with an allreduce of their own), every result checked:
         "FORMED rank=<r>" after init, "DONE rank=<r> steps=<n>" at the end.
"""

import os
import signal
import sys
import time

import numpy as np

import horovod.numpy as hvd


def say(line):
    print(line, flush=True)


def init_or_exit():
    start = time.monotonic()
    try:
        hvd.init()
    except Exception as e:  # the engine's error, whatever its class: the test reads it
        say(f"INIT ERROR {type(e).__name__}: {e}")
        say(f"INIT SECONDS {time.monotonic() - start:.1f}")
        sys.exit(3)


def job_init():
    init_or_exit()
    got = hvd.allreduce(np.ones(3), op=hvd.Sum, name="fault/init")
    assert (got == hvd.size()).all(), got
    say(f"READY rank={hvd.rank()}")


def job_killed():
    init_or_exit()
    r = hvd.rank()
    hvd.allreduce(np.ones(1000), name="fault/first")
    if r == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for step in range(1_000_000):
            hvd.allreduce(np.ones(1000), name=f"fault/loop{step % 4}")
    except Exception as e:
        say(f"ERROR rank={r} after {time.monotonic() - start:.1f} s {type(e).__name__}: {e}")
        return
    raise AssertionError("a million allreduces without the killed rank")


def job_steady():
    seconds = float(sys.argv[2])
    init_or_exit()
    r, n = hvd.rank(), hvd.size()
    say(f"FORMED rank={r}")
    deadline = time.monotonic() + seconds
    steps = 0
    while True:
        # The ranks agree on when to stop (each one's own clock could end it a step apart).
        late = np.array([time.monotonic() >= deadline], np.int32)
        if hvd.allreduce(late, op=hvd.Max, name="steady/stop")[0]:
            break
        for size in (7, 1000, 100_000):
            got = hvd.allreduce(np.full(size, r + 1.0), op=hvd.Sum, name=f"steady/{size}")
            assert (got == n * (n + 1) / 2).all(), (size, got[:4])
        steps += 1
        time.sleep(0.01)
    say(f"DONE rank={r} steps={steps}")


if __name__ == "__main__":
    {"init": job_init, "killed": job_killed, "steady": job_steady}[sys.argv[1]]()
