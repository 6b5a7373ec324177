"""The rank side of test_tcp_reform.py: one process forms a TCP world, leaves it and forms
another in the same process (`python tcp_reform_jobs.py JOB PORT...`, torchrun's variables;
each PORT is a MASTER_PORT, rank 0 serving the rendezvous at PORT + 1). Every line it prints
is one fact the test asserts:

  reform   PORT_A PORT_B: 3 ranks at A; all shut down; rank 2 ends, ranks 0 and 1 form a world
           of 2 at B (HOROVOD_TIMELINE's file becomes timeline2.json beside it: one per world).
  killed   PORT_A PORT_B: 3 ranks at A; rank 2 SIGKILLs itself after the first allreduce; the
           others get HorovodInternalError and re-form at B with a newcomer (job `newcomer`) as
           rank 2: rank 0 calls hvd.shutdown() first, rank 1 calls hvd.init() straight away.
  newcomer PORT_B: rank 2 of the world at B (HOROVOD_RENDEZVOUS_TIMEOUT covers the wait).
  missing  PORT_A PORT_B PORT_C: 2 ranks at A; both re-init into a world of 3 at B where rank 2
           never comes (that init fails, naming it); then into a world of 2 at C.

Lines: "WORLD <n> rank=<r> size=<s>" once formed; "SUM <n> rank=<r> ok" after checked
allreduces; "RESOURCES <when> fds=<n> threads=<n>"; "ERROR <n> rank=<r> <Type>: <msg>";
"INIT ERROR <n> after <s> s <Type>: <msg>"; "DONE rank=<r>".
"""

import os
import signal
import sys
import time

import numpy as np

import horovod.numpy as hvd


def say(line):
    print(line, flush=True)


def resources(when):
    """Open fds and threads of this process (no sockets or threads of a past world may stay)."""
    fds = len(os.listdir("/proc/self/fd"))
    threads = len(os.listdir("/proc/self/task"))
    say(f"RESOURCES {when} fds={fds} threads={threads}")


def enter(world, port, size):
    """hvd.init() into the world at MASTER_PORT `port` of `size` ranks (RANK unchanged)."""
    os.environ["MASTER_PORT"] = str(port)
    os.environ["WORLD_SIZE"] = str(size)
    os.environ["LOCAL_WORLD_SIZE"] = str(size)
    hvd.init()
    say(f"WORLD {world} rank={hvd.rank()} size={hvd.size()}")


def check(world, n):
    """Allreduces whose results depend on the world's size and ranks, named and unnamed, of a
    size that differs per world under the same name (a stale cached response would not fit)."""
    r, size = hvd.rank(), hvd.size()
    assert size == n, (size, n)
    for _ in range(3):  # the repeats run from the response cache
        got = hvd.allreduce(np.full(10 * world, r + 1.0), op=hvd.Sum, name="reform/x")
        assert got.shape == (10 * world,) and (got == size * (size + 1) / 2).all(), got
    got = hvd.allreduce(np.array([r], np.int64), op=hvd.Sum)  # an unnamed op: counted names
    assert got[0] == size * (size - 1) // 2, got
    ranks = hvd.allgather(np.array([r], np.int64), name="reform/ranks")
    assert ranks.tolist() == list(range(size)), ranks
    hvd.allreduce(np.ones(2), name=f"reform/world{world}")  # the timeline's mark of this world
    say(f"SUM {world} rank={r} ok")


def job_reform(port_a, port_b):
    resources("start")
    enter(1, port_a, 3)
    r = hvd.rank()
    check(1, 3)
    evens = hvd.add_process_set([0, 2])
    hvd.shutdown()
    resources("after1")
    if r == 2:
        say(f"DONE rank={r}")
        return
    # Read at init, like every knob: the next world writes a timeline of its own.
    if os.environ.get("HOROVOD_TIMELINE"):
        folder = os.path.dirname(os.environ["HOROVOD_TIMELINE"])
        os.environ["HOROVOD_TIMELINE"] = os.path.join(folder, "timeline2.json")
    enter(2, port_b, 2)
    check(2, 2)
    try:  # the last world's set is gone with it
        hvd.allreduce(np.ones(1), name="reform/old_set", process_set=evens)
        raise AssertionError("an op on the last world's process set ran")
    except ValueError as e:
        say(f"OLDSET rank={r} {e}")
    hvd.shutdown()
    resources("after2")
    say(f"DONE rank={r}")


def job_killed(port_a, port_b):
    resources("start")
    enter(1, port_a, 3)
    r = hvd.rank()
    hvd.allreduce(np.ones(1000), name="killed/first")
    hvd.allreduce(np.ones(1))  # an unnamed op: its counter must restart in the next world
    resources("after1")
    if r == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for step in range(1_000_000):
            hvd.allreduce(np.ones(1000), name=f"killed/loop{step % 4}")
        raise AssertionError("a million allreduces without the killed rank")
    except hvd.HorovodInternalError as e:
        say(f"ERROR 1 rank={r} after {time.monotonic() - start:.1f} s {type(e).__name__}: {e}")
    if r == 0:
        hvd.shutdown()
    enter(2, port_b, 3)
    check(2, 3)
    hvd.shutdown()
    resources("after2")
    say(f"DONE rank={r}")


def job_newcomer(port_b):
    enter(2, port_b, 3)
    r = hvd.rank()
    check(2, 3)
    hvd.shutdown()
    say(f"DONE rank={r}")


def job_missing(port_a, port_b, port_c):
    enter(1, port_a, 2)
    r = hvd.rank()
    check(1, 2)
    hvd.shutdown()
    resources("after1")
    start = time.monotonic()
    try:
        enter(2, port_b, 3)
        raise AssertionError("a world of 3 formed with 2 ranks")
    except Exception as e:  # the engine's error, whatever its class: the test reads it
        say(f"INIT ERROR 2 after {time.monotonic() - start:.1f} s {type(e).__name__}: {e}")
    enter(3, port_c, 2)
    check(3, 2)
    hvd.shutdown()
    resources("after3")
    say(f"DONE rank={r}")


if __name__ == "__main__":
    jobs = {"reform": job_reform, "killed": job_killed, "newcomer": job_newcomer}
    jobs["missing"] = job_missing
    jobs[sys.argv[1]](*map(int, sys.argv[2:]))
