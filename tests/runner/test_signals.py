"""No process of a job outlives horovodrun (issue 17, item 11): a real horovodrun runs a real
`mpirun -np 2` of a sleeping Python program and is sent SIGHUP (its terminal closed), SIGKILL
(which it cannot catch), SIGTERM, or SIGINT twice (hurry up); every process of the job must then
be gone within a bound. Before: mpirun runs in a session of its own and only SIGINT/SIGTERM were
passed on, so after SIGHUP or SIGKILL mpirun and both ranks kept running."""

import contextlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.support import mpi, procs
from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")

# The marker is an argument the program ignores: it puts the job on every command line.
SLEEPER = "import time; print('RANK UP', flush=True); time.sleep(600)"
# horovodrun gives mpirun 10 s to stop its ranks after a signal before killing them all.
GONE_WITHIN = 20.0


@contextlib.contextmanager
def running_job(tmp_path):
    """A real horovodrun of the sleeper on 2 ranks, once both ranks run: yields (its process,
    its log, the job's marker). Whatever the test's outcome, the job is killed afterwards."""
    marker = procs.new_marker("signals")
    log = tmp_path / "horovodrun.log"
    cmd = [sys.executable, "-m", "horovod.runner.launch", "-np", "2"]
    with open(log, "wb") as out:
        # A session of its own, like a launcher started from a terminal; output to a file, which
        # outlives it.
        hr = subprocess.Popen(
            cmd + [sys.executable, "-c", SLEEPER, marker],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=mpi.environment(),
            start_new_session=True,
        )
    try:
        procs.wait_for(lambda: log.read_text().count("RANK UP") == 2, 60, "both ranks starting")
        job = procs.with_marker(marker)
        assert len(job) == 4, f"expected horovodrun, mpirun and 2 ranks: {job}"
        yield hr, log, marker
    finally:
        procs.kill_all(marker)
        hr.kill()
        hr.wait()


def assert_job_gone(marker, log, after):
    left = procs.wait_gone(marker, GONE_WITHIN)
    assert not left, (
        f"{len(left)} process(es) of the job still run {GONE_WITHIN:.0f} s after {after}: "
        f"{left}\nhorovodrun's output:\n{log.read_text()}"
    )


@pytest.mark.parametrize(
    "sig", [signal.SIGHUP, signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name
)
def test_no_process_outlives_horovodrun(sig, tmp_path):
    with running_job(tmp_path) as (hr, log, marker):
        hr.send_signal(sig)
        assert_job_gone(marker, log, f"{sig.name} to horovodrun")
        rc = hr.wait(5)
        if sig != signal.SIGKILL:  # shell style: ended by that signal
            assert rc == 128 + sig, f"rc={rc}\n{log.read_text()}"


def test_second_signal_kills_the_whole_job(tmp_path):
    # The second Ctrl-C kills mpirun and the ranks at once. The ranks on this host are in
    # process groups of their own: before, killpg of mpirun's group left them running.
    with running_job(tmp_path) as (hr, log, marker):
        hr.send_signal(signal.SIGINT)
        time.sleep(0.05)
        hr.send_signal(signal.SIGINT)
        assert_job_gone(marker, log, "SIGINT twice to horovodrun")
        assert hr.wait(5) == 128 + signal.SIGINT
