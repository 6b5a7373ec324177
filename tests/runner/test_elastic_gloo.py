"""horovodrun --gloo's elastic mode re-forms the job in process (horovod/runner/elastic_pool.py):
a real horovodrun with --host-discovery-script around tests/runner/jobs/elastic_steps.py, as in
test_elastic.py, over the TCP transport. Each DONE line carries its process's pid, and each
process writes a pid file per generation it joins, so the tests see which processes lived on:
survivors keep theirs, only new slots start a new process. HOROVOD_ELASTIC_REFORM=relaunch keeps
the relaunch of every process (test_gloo_launch.py's elastic test runs the default)."""

import os
import re
import signal
import subprocess
import sys
import time

from tests.runner.elastic_job import JOB, done_lines, horovodrun, wait_for
from tests.support import mpi
from tests.support.tcp import session_members


def pids(out):
    """{rank: pid} of the DONE lines."""
    return {int(r): int(p) for r, p in re.findall(r"DONE gen=\d+ rank=(\d+) .* pid=(\d+)", out)}


def pid_of(tmp, gen, rank):
    return int((tmp / "pids" / f"g{gen}-r{rank}.pid").read_text())


def kill_rank_2(tmp):
    pid = tmp / "pids" / "g0-r2.pid"
    wait_for(pid)
    (tmp / "hosts").write_text("localhost:2\n")
    os.kill(int(pid.read_text()), signal.SIGKILL)


def test_killed_rank_survivors_reform_in_their_processes(tmp_path):
    started = time.monotonic()
    rc, out = horovodrun(tmp_path, "localhost:3\n", "--gloo", "--min-np", "2", during=kill_rank_2)
    assert rc == 0, out
    assert re.search(r"rank 2 on \S+ killed by signal 9", out), out
    assert "generation 1: 2 rank(s)" in out and "resumed from commit" in out, out
    for r in (0, 1):
        assert f"rank {r}: a collective failed" in out and "re-forming in this process" in out
    done = done_lines(out)
    assert len(done) == 2 and all(d[:3] == (d[0], d[1], "2") and float(d[4]) == 40.0 for d in done)
    assert pids(out) == {0: pid_of(tmp_path, 0, 0), 1: pid_of(tmp_path, 0, 1)}, out
    assert out.count("RESET gen=1 size=2") == 2, out
    assert not (tmp_path / "store").exists()
    assert time.monotonic() - started < 60


def test_growth_starts_a_process_for_the_new_slot_only(tmp_path):
    def grow(tmp):
        wait_for(tmp / "pids" / "g0-r1.pid")
        (tmp / "hosts").write_text("localhost:3\n")

    rc, out = horovodrun(
        tmp_path, "localhost:2\n", "--gloo", "--min-np", "2", "--max-np", "3", during=grow
    )
    assert rc == 0, out
    # The driver ends generation 0 at the first rank's request; the other may still be a step
    # behind ("1 rank(s) asked to re-form"): both keep their processes either way (below).
    assert "generation 1: 3 rank(s)" in out, out
    assert re.search(r"generation 0 ended .*[12] rank\(s\) asked to re-form", out), out
    m = re.search(r"resumed from commit (\d+)", out)
    assert m and int(m.group(1)) >= 1, out
    done = done_lines(out)
    assert len(done) == 3 and all(d[2] == "3" and float(d[4]) == 40.0 for d in done), out
    got = pids(out)
    assert got[0] == pid_of(tmp_path, 0, 0) and got[1] == pid_of(tmp_path, 0, 1), out
    assert got[2] not in (got[0], got[1]) and got[2] == pid_of(tmp_path, 1, 2), out
    assert out.count("RESET gen=1 size=3") == 3, out


def test_shrink_ends_the_process_left_without_a_slot(tmp_path):
    """Discovery drops a slot with nothing killed: the ranks re-form at a commit, the two first
    keep their processes and rank 2's process, which the new world has no slot for, ends."""

    def shrink(tmp):
        wait_for(tmp / "pids" / "g0-r2.pid")
        (tmp / "hosts").write_text("localhost:2\n")

    rc, out = horovodrun(tmp_path, "localhost:3\n", "--gloo", "--min-np", "2", during=shrink)
    assert rc == 0, out
    assert "generation 1: 2 rank(s)" in out, out
    assert "rank 2: not in the next generation (generation 1 has no slot for it)" in out, out
    done = done_lines(out)
    assert len(done) == 2 and all(d[2] == "2" and float(d[4]) == 40.0 for d in done), out
    assert pids(out) == {0: pid_of(tmp_path, 0, 0), 1: pid_of(tmp_path, 0, 1)}, out


def test_relaunch_is_kept_on_request(tmp_path):
    """HOROVOD_ELASTIC_REFORM=relaunch: every rank of the next generation is a new process."""
    rc, out = horovodrun(
        tmp_path,
        "localhost:3\n",
        "--gloo",
        "--min-np",
        "2",
        env={"HOROVOD_ELASTIC_REFORM": "relaunch"},
        during=kill_rank_2,
    )
    assert rc == 0, out
    assert "generation 1: 2 rank(s)" in out and "re-forming" not in out, out
    done = done_lines(out)
    assert len(done) == 2 and all(d[2] == "2" and float(d[4]) == 40.0 for d in done), out
    got = pids(out)
    assert got[0] != pid_of(tmp_path, 0, 0) and got[1] != pid_of(tmp_path, 0, 1), out


def test_sigterm_ends_every_process_of_the_job(tmp_path):
    """horovodrun told to stop mid-job (after a re-form, while its processes outlive their
    generation): it ends with 128 + SIGTERM and leaves no process of the job."""
    (tmp_path / "hosts").write_text("localhost:3\n")
    (tmp_path / "pids").mkdir()
    cmd = [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "--gloo",
        "--min-np",
        "2",
        "--host-discovery-script",
        f"cat {tmp_path / 'hosts'}",
        sys.executable,
        JOB,
        "--steps",
        "100000",
        "--pid-dir",
        str(tmp_path / "pids"),
    ]
    env = mpi.environment({"HOROVOD_ELASTIC_STORE": str(tmp_path / "store")})
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        kill_rank_2(tmp_path)
        wait_for(tmp_path / "pids" / "g1-r1.pid")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    left = session_members(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "SIGTERM: stopping the ranks" in out, out
    assert not left, f"processes of the job left: {left}\n{out}"
