"""The elastic job of the runner's tests on this host (test_elastic.py, and test_gloo_launch.py
over Gloo): a real horovodrun with --host-discovery-script around
tests/runner/jobs/elastic_steps.py, and what the tests wait for and read of it."""

import re
import subprocess
import sys
import threading
import time

import pytest

from tests.support import mpi
from tests.support.paths import ROOT

JOB = str(ROOT / "tests" / "runner" / "jobs" / "elastic_steps.py")


def horovodrun(
    tmp_path, hosts, *flags, steps=40, delay=0.1, timeout=90, during=None, script=None, env=None
):
    """Runs an elastic job with the discovery script `script` (default `cat hosts`; hosts: the
    file's first text) and `env` added; `during(tmp_path)` runs in a thread meanwhile. Returns
    (rc, output)."""
    (tmp_path / "hosts").write_text(hosts)
    (tmp_path / "pids").mkdir(exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "--host-discovery-script",
        script or f"cat {tmp_path / 'hosts'}",
        *flags,
        sys.executable,
        JOB,
        "--steps",
        str(steps),
        "--delay",
        str(delay),
        "--pid-dir",
        str(tmp_path / "pids"),
    ]
    env = mpi.environment({"HOROVOD_ELASTIC_STORE": str(tmp_path / "store"), **(env or {})})
    thread = threading.Thread(target=during, args=(tmp_path,)) if during else None
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if thread:
        thread.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"elastic job did not end within {timeout} s:\n{out[-4000:]}")
    finally:
        if thread:
            thread.join()
    return proc.returncode, out


def wait_for(path, timeout=30):
    """Waits for `path` (a rank's pid file) and for a commit on disk after it."""
    deadline = time.monotonic() + timeout
    while not path.exists() or not any(
        p.stat().st_mtime >= path.stat().st_mtime
        for p in (path.parent.parent / "store").glob("*/*.commit")
    ):
        assert time.monotonic() < deadline, f"{path} and a commit after it never appeared"
        time.sleep(0.05)


def done_lines(out):
    return re.findall(r"DONE gen=(\d+) rank=(\d+) size=(\d+) step=(\d+) w=([\d.]+)", out)
