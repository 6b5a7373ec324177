"""Issue 17, item 10: a peer busy with local work (not waiting on anyone) is not a stall."""

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
