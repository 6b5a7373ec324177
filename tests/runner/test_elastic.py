"""Elastic mode on this host (issue 18): a real horovodrun with --host-discovery-script runs a
real mpirun of tests/runner/jobs/elastic_steps.py (horovod.numpy, hvd.elastic's run_fn and
ObjectState); the discovery script reads a file the test edits while the job runs, and a rank
is killed with SIGKILL or paused with SIGSTOP. Every step adds 1 to the state's `w`, so
`w == steps` at the end means each step counted exactly once across the rollbacks. Multi-host
behaviour (a container killed, paused, added) is in tests/cluster/test_elastic.py."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from horovod.runner import elastic_driver, launch
from tests.runner.elastic_job import done_lines, horovodrun, wait_for
from tests.support import mpi

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")


def test_grows_when_discovery_lists_more_slots(tmp_path):
    def grow(tmp):
        wait_for(tmp / "pids" / "g0-r1.pid")
        (tmp / "hosts").write_text("localhost:3\n")

    rc, out = horovodrun(tmp_path, "localhost:2\n", "--min-np", "2", "--max-np", "3", during=grow)
    assert rc == 0, out
    assert "hosts changed" in out and "generation 1: 3 rank(s)" in out, out
    m = re.search(r"resumed from commit (\d+)", out)
    assert m and int(m.group(1)) >= 1, out  # the new rank started from the commit
    done = done_lines(out)
    assert len(done) == 3 and {d[2] for d in done} == {"3"}, out
    assert all(d[3] == "40" and float(d[4]) == 40.0 for d in done), out
    assert out.count("RESET gen=1 size=3") == 3, out  # the reset callbacks saw the new size
    assert not (tmp_path / "store").exists()  # the job's commits and the store folder (class 3)


def test_rank_killed_goes_on_with_the_rest(tmp_path):
    def kill(tmp):
        pid = tmp / "pids" / "g0-r2.pid"
        wait_for(pid)
        (tmp / "hosts").write_text("localhost:2\n")
        os.kill(int(pid.read_text()), signal.SIGKILL)

    started = time.monotonic()
    rc, out = horovodrun(tmp_path, "localhost:3\n", "--min-np", "2", during=kill)
    assert rc == 0, out
    assert re.search(r"rank 2 on \S+ killed by signal 9", out), out
    assert "generation 1: 2 rank(s)" in out, out
    assert "resumed from commit" in out, out
    done = done_lines(out)
    assert len(done) == 2 and all(d[2] == "2" and float(d[4]) == 40.0 for d in done), out
    assert time.monotonic() - started < 60


def test_below_min_np_ends_naming_what_is_missing(tmp_path):
    started = time.monotonic()
    rc, out = horovodrun(
        tmp_path, "localhost:1\n", "--min-np", "2", "--elastic-timeout", "3", steps=5, timeout=40
    )
    assert rc == 1, out
    assert "needed 2 slot(s) (--min-np)" in out and "localhost:1" in out, out
    assert "--elastic-timeout" in out, out
    assert time.monotonic() - started < 3 + 30


def test_reset_limit_ends_the_job(tmp_path):
    def kill_twice(tmp):
        for gen in (0, 1):
            pid = tmp / "pids" / f"g{gen}-r1.pid"
            wait_for(pid)
            os.kill(int(pid.read_text()), signal.SIGKILL)

    rc, out = horovodrun(
        tmp_path, "localhost:2\n", "--min-np", "2", "--reset-limit", "1", during=kill_twice
    )
    assert rc != 0, out
    assert "reset 2 is over --reset-limit 1; ending the job" in out, out


def test_script_error_is_not_retried(tmp_path):
    """A job that fails on its own (no lost peer, no host change) ends at once with its code."""
    (tmp_path / "hosts").write_text("localhost:2\n")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "horovod.runner.launch",
            "--host-discovery-script",
            f"cat {tmp_path / 'hosts'}",
            "--min-np",
            "2",
            sys.executable,
            "-c",
            "import sys; sys.exit(3)",
        ],
        env=mpi.environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3, p.stderr
    assert "the script's own error; ending the job" in p.stderr, p.stderr
    assert "generation 1" not in p.stderr


def test_discovery_output_and_flags():
    assert elastic_driver.parse_discovery("a:2\n# c\n\nb\na:1\n", 4) == [("a", 3), ("b", 4)]
    with pytest.raises(elastic_driver.DiscoveryError, match="host:slots"):
        elastic_driver.parse_discovery("a:x\n", 1)
    assert elastic_driver._fill([("a", 2), ("b", 2)], 3) == [("a", 2), ("b", 1)]
    args = launch.parse_args(["--host-discovery-script", "d", "-np", "2", "python", "t.py"])
    assert args.min_np == 2 and args.max_np is None and args.host_list is None
    for bad, words in [
        (["--min-np", "2", "python", "t.py"], "need --host-discovery-script"),
        (["--host-discovery-script", "d", "-H", "a:1", "python", "t.py"], "not both"),
        (["--host-discovery-script", "d", "--min-np", "3", "--max-np", "2", "x"], "below"),
    ]:
        p = subprocess.run(
            [sys.executable, "-m", "horovod.runner.launch", *bad],
            env=mpi.environment(),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert p.returncode == 2 and words in p.stderr, (bad, p.stderr)


def processes_marked(marker):
    """Pids of the live processes (zombies aside) whose environment holds `marker`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{entry}/environ", "rb") as f:
                marked = marker.encode() in f.read().split(b"\0")
        except (OSError, IndexError):
            continue
        if marked and state != b"Z":
            found.append(int(entry))
    return found


def rank_alive(pid):
    """Whether `pid` is still one of this test's ranks (not a zombie, not a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return state != b"Z" and b"elastic_steps.py" in f.read()
    except OSError:
        return False


def test_hung_discovery_is_bounded_and_leaves_nothing(tmp_path):
    """Issue 42, class 3: a discovery script that stops answering mid-run (a `sleep 600` in it)
    is killed with its process group after DISCOVERY_TIMEOUT and the log says so; the job
    finishes on the hosts it listed last, and neither the script's processes (one is in flight
    when the job ends) nor the store folder outlive the job."""
    script = tmp_path / "discover.sh"
    marker = f"DISCOVERY_TEST={tmp_path}"  # every process the script starts inherits it
    script.write_text(
        f"export {marker}\ncat {tmp_path}/hosts\nif [ -e {tmp_path}/hang ]; then sleep 600; fi\n"
    )

    def hang(tmp):
        wait_for(tmp / "pids" / "g0-r1.pid")
        (tmp / "hang").touch()

    delay = 0.1  # the job outlasts one timed-out call by about 5 s
    steps = int((elastic_driver.DISCOVERY_TIMEOUT + 5) / delay)
    rc, out = horovodrun(
        tmp_path,
        "localhost:2\n",
        "--min-np",
        "2",
        script=f"sh {script}",
        steps=steps,
        delay=delay,
        during=hang,
    )
    left = processes_marked(marker)
    for pid in left:  # ours (the marker names this test's folder): not to outlive the test
        os.kill(pid, signal.SIGKILL)
    assert rc == 0, out
    assert not left, f"discovery processes left running: {left}"
    assert not (tmp_path / "store").exists(), "the store folder outlived the job"
    assert re.search(r"elastic: discovery timed out: .* did not answer within \d+ s", out), out
    assert "keeping the hosts it listed last (localhost:2)" in out, out
    done = done_lines(out)
    assert len(done) == 2 and all(float(d[4]) == steps for d in done), out


def test_paused_rank_is_a_lost_peer(tmp_path):
    """Issue 42, class 9: SIGSTOP to a rank on a host that still answers. The others' watchdog
    aborts the generation (MPI_Abort: no rank asks for a relaunch, and ssh to the host works),
    which the driver must count as a lost peer, as it does a paused container, not as the
    script's own error. mpirun kills the paused process, so its slot is free again and the
    next generation runs on the 3 slots discovery lists, from the last commit."""
    stall = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    paused = []

    def pause(tmp):
        pid = tmp / "pids" / "g0-r2.pid"
        wait_for(pid)
        paused.append(int(pid.read_text()))
        os.kill(paused[0], signal.SIGSTOP)

    try:
        rc, out = horovodrun(tmp_path, "localhost:3\n", "--min-np", "2", env=stall, during=pause)
    finally:
        left = paused and rank_alive(paused[0])
        if left:  # still ours (a rank of this job's): not to outlive the test
            os.kill(paused[0], signal.SIGKILL)
    assert rc == 0, out
    assert "rank 2 on localhost stopped answering inside a collective" in out, out
    assert "script's own error" not in out, out
    assert "generation 1: 3 rank(s)" in out and "resumed from commit" in out, out
    done = done_lines(out)
    assert len(done) == 3 and all(d[2] == "3" and float(d[4]) == 40.0 for d in done), out
    assert not left, "the paused rank outlived the job"
