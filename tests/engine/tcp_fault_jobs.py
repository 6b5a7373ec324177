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
  stopped rank 1 stops itself (SIGSTOP) inside a large ring allreduce (argv[3] "ring") or
         between ops, so that the others block in a negotiation round ("idle"); rank 0 sees it
         stopped (/proc), waits argv[2] seconds and sends it SIGCONT; every rank then checks the
         sum and prints "DONE rank=<r>". The watchdog's reports meanwhile are the test's.
  busy   rank 0 allgathers argv[2] MiB, the others one row: rank 0 copies its segment into the
         output (seconds) while the others wait for it; "OK busy rank=<r> <seconds>". Rank 0
         creates the file argv[3] once its tensor is filled; the others wait for it.
"""

import os
import signal
import sys
import threading
import time

import numpy as np

import horovod.numpy as hvd
from tests.support.stops import stop_once_the_ring_runs


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


def wake_when_stopped(pid, after):
    """Sends `pid` SIGCONT `after` seconds after /proc shows it stopped (60 s bound)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                break
        time.sleep(0.01)
    say(f"SEEN STOPPED pid={pid}")
    time.sleep(after)
    os.kill(pid, signal.SIGCONT)


def job_stopped():
    init_or_exit()
    r, n = hvd.rank(), hvd.size()
    pids = hvd.allgather(np.array([os.getpid()], np.int64), name="stopped/pids")
    x = np.ones(32 << 20, np.float32)  # 128 MiB: the ring runs for a fraction of a second
    hvd.allreduce(x, op=hvd.Sum, name="stopped/big", out=x)
    if r == 0:
        waker = threading.Thread(target=wake_when_stopped, args=(int(pids[1]), float(sys.argv[2])))
        waker.start()
    if sys.argv[3] == "idle":
        if r == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        got = hvd.allreduce(np.ones(2), op=hvd.Sum, name="stopped/idle")
        assert (got == n).all(), got
        if r == 0:
            waker.join()
        say(f"DONE rank={r}")
        return
    h = hvd.allreduce_async(x, op=hvd.Sum, name="stopped/big", out=x)
    if r == 1:
        stop_once_the_ring_runs(x, n)
    hvd.synchronize(h)
    assert (x == n * n).all(), x[:4]
    if r == 0:
        waker.join()
    say(f"DONE rank={r}")


def job_busy():
    init_or_exit()
    r, n = hvd.rank(), hvd.size()
    mib = int(sys.argv[2])
    rows = mib << 20 if r == 0 else 1
    x = np.full((rows, 1), r + 1, np.int8)
    # A barrier of Horovod's own once x exists everywhere: submitted while rank 0 still filled
    # x, the allgather would wait for it in negotiation, which the watchdog rightly reports. The
    # barrier itself waits as long for rank 0, so the others enter it only once rank 0 says its x
    # is ready (the file argv[3]).
    ready = sys.argv[3]
    if r == 0:
        open(ready, "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(ready):
        assert time.monotonic() < deadline, "rank 0 never filled its tensor"
        time.sleep(0.01)
    hvd.allreduce(np.ones(1), name="busy/barrier")
    start = time.perf_counter()
    got = hvd.allgather(x, name="busy/local")
    elapsed = time.perf_counter() - start
    big = mib << 20
    assert got.shape == (big + n - 1, 1), got.shape
    assert (got[:big] == 1).all() and (got[big:, 0] == np.arange(2, n + 1)).all()
    say(f"OK busy rank={r} {elapsed:.3f}")


if __name__ == "__main__":
    jobs = {"init": job_init, "killed": job_killed, "steady": job_steady}
    jobs.update(stopped=job_stopped, busy=job_busy)
    jobs[sys.argv[1]]()
