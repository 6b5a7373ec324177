"""Issue 17, items 9 and 10: a stall shutdown ends the whole job within a bound, with the reason
on every rank and no process left; a peer busy with local work (not waiting on anyone) is not a
stall."""

import re
import time

from tests.support import procs
from tests.support.mpi import ENGINE


def launch_marked(np_, name, *args, env, timeout):
    """The scenario with a marker as its last argument; returns (rc, out, err, seconds, the
    job's processes still alive 10 s after mpirun returned). Leftovers are killed."""
    marker = procs.new_marker(name)
    start = time.monotonic()
    try:
        rc, out, err = ENGINE.launch(np_, name, *args, marker, env=env, timeout=timeout)
        seconds = time.monotonic() - start
        left = procs.wait_gone(marker, 10)
    finally:
        procs.kill_all(marker)
    return rc, out, err, seconds, left


# -- 9. after a stall shutdown the job ends, even with a rank stuck outside Horovod ---------------

STALL = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "2"}


def check_stall_exit(np_, mode, bound, how):
    rc, out, err, seconds, left = launch_marked(np_, "stall_exit", mode, env=STALL, timeout=90)
    report = f"rc={rc}, {seconds:.1f} s\nstdout:\n{out}\nstderr:\n{err}"
    assert rc != 0, report
    assert seconds < bound, f"the job took {seconds:.1f} s (bound {bound} s)\n{report}"
    assert not left, f"processes of the job left running: {left}\n{report}"
    # Every rank states the reason, naming the tensor and the ranks it waited for.
    for r in range(np_):
        assert re.search(
            rf"\[horovod rank {r} ERROR\] Horovod stall shutdown \(HOROVOD_STALL_SHUTDOWN_TIME_"
            rf"SECONDS=2\): tensor 'stall/x' \(ALLREDUCE\) has waited \d+ s for ranks? \[?1",
            err,
        ), f"rank {r} did not log the stall shutdown\n{report}"
    assert re.search(rf"ending the job with MPI_Abort {how} after the stall shutdown", err), report


def test_stall_shutdown_ends_the_job(world):
    # Rank 0's program ends after the error; the others sleep outside Horovod. Before: rank 0
    # waited in MPI_Finalize for the sleepers, forever (here: until the 90 s timeout).
    check_stall_exit(world, "exit", 30, "at shutdown")


def test_stall_shutdown_ends_the_job_when_the_error_is_ignored():
    # No rank ends by itself: the engine's grace of 10 s bounds the job. Before: never ended.
    check_stall_exit(2, "ignore", 45, "after the grace period")


# -- 10. a peer's local work is progress ----------------------------------------------------------

WATCH = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "0.4", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "1"}
SLOW_MIB = 400


def test_peer_busy_with_local_work_is_not_a_stall():
    # Rank 0 fills its 400 MiB segment of a fresh output while rank 1, whose segment is one
    # row, waits for it. Before: 2 s here, page faults inside one memcpy and inside MPI, and
    # "RING_ALLGATHER ... blocked for 1.0 s with no progress, waiting for rank 0 ... Aborting
    # the job". Now the output is prefaulted and filled in pieces that count as progress, and
    # a rank busy with them answers its waiting peers (the roll call's answers are unit-tested
    # in tests/unit/cpp/watchdog_test.cc, without timing luck).
    rc, out, err, seconds, left = launch_marked(
        2, "slow_local_step", SLOW_MIB, env=WATCH, timeout=180
    )
    assert rc == 0 and "OK slow_local_step rank=1" in out, f"rc={rc}\n{out}\n{err}"
    assert "Aborting the job" not in err, err
    elapsed = [float(t) for t in re.findall(r"ELAPSED rank=\d+ ([\d.]+)", out)]
    print(f"allgather of {SLOW_MIB} MiB took {elapsed} s; watchdog shutdown at 1 s")
