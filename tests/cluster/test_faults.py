"""Faults on a real compose cluster, each bounded: a worker killed, cut off the network or
paused mid-job, and preflight failures (no sshd, wrong port, wrong key, version skew, a name
that does not resolve).  Every test asserts the message names the host or the ranks, and that
nothing is left running on the surviving workers."""

import re
import subprocess
import time

import pytest

from tests.support.compose import TAG, TIMINGS, make_cluster

pytestmark = pytest.mark.alone  # every test here is bounded in time

STEPS = "horovodrun python /jobs/steps.py --seconds 300"
# Short stall bounds so network faults end quickly: warn after 2 s, shut down after 8 s.
STALL = "HOROVOD_STALL_CHECK_TIME_SECONDS=2 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=8"


def docker(*args):
    p = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"docker {' '.join(args)}: {p.stderr}"


def pause(container):
    """docker pause, retried: the cgroup freezer can fail ('unable to freeze') while the
    container's processes are busy in the kernel."""
    for _ in range(10):
        p = subprocess.run(
            ["docker", "pause", container], capture_output=True, text=True, timeout=60
        )
        if p.returncode == 0:
            return
        time.sleep(0.2)
    pytest.fail(f"docker pause {container}: {p.stderr}")


def assert_nothing_left(c, containers, timeout=15):
    """No rank (python /jobs/...) and no Open MPI daemon left in the given containers."""
    deadline = time.monotonic() + timeout
    while True:
        left = {w: c.processes(w, "jobs/|orted") for w in containers}
        left = {w: p for w, p in left.items() if p}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not left, f"processes left {timeout} s after the job ended: {left}"


def test_killed_worker_ends_the_job(fresh_cluster):
    c = fresh_cluster
    job = c.start(STEPS)
    job.wait_for(r"^step 11$", 120)
    docker("kill", c.worker(2))
    rc, seconds = job.wait(60)
    TIMINGS.append(("worker killed: job ended after", seconds))
    assert rc != 0, job.output
    assert re.search(rf"{c.worker(2)}|rank [23]\b", job.output), job.output
    assert_nothing_left(c, [c.worker(1), c.launcher])


def assert_stalled_worker_is_named(c, fault, undo, label):
    """A job whose worker 2 stops answering (fault) ends within the stall bound, the survivors'
    watchdog naming ranks 2 and 3 and horovodrun their host; nothing is left on the survivors."""
    job = c.start(f"{STALL} {STEPS}")
    job.wait_for(r"^step 11$", 120)
    fault(c.worker(2))
    try:
        rc, seconds = job.wait(8 + 30)  # stall shutdown, then horovodrun's 15 s for mpirun
        TIMINGS.append((f"worker {label}: job ended after", seconds))
    finally:
        if undo:
            undo(c.worker(2))
    assert rc != 0, job.output
    # A survivor that had already left the section names the other survivor too.
    assert re.search(r"waiting for ranks \[(\d, )*2, 3\] \(silent", job.output), job.output
    assert re.search(rf"{c.worker(2)} \(ranks 2, 3\)", job.output), job.output
    assert_nothing_left(c, [c.worker(1), c.launcher])


def test_disconnected_worker_fails_within_the_stall_bound(fresh_cluster):
    c = fresh_cluster
    assert_stalled_worker_is_named(
        c, lambda w: docker("network", "disconnect", "-f", c.network, w), None, "cut off"
    )


def test_paused_worker_is_named_by_the_watchdog(fresh_cluster):
    assert_stalled_worker_is_named(fresh_cluster, pause, lambda w: docker("unpause", w), "paused")


@pytest.fixture(scope="module")
def pair():
    c = make_cluster(2)
    yield c
    c.down()


def preflight_fails(c, flags, host, *phrases, timeout=10):
    """horovodrun with flags fails its preflight within the bound, naming host and phrases,
    and starts nothing on the workers."""
    rc, out, err, seconds = c.run(
        f"horovodrun --start-timeout {timeout} {flags} python /jobs/steps.py", timeout=timeout + 30
    )
    assert rc == 3, f"rc={rc}\n{out}\n{err}"
    assert seconds < timeout + 5, f"preflight took {seconds:.1f} s, bound {timeout} s\n{err}"
    TIMINGS.append((f"preflight failure ({host}): horovodrun exited after", seconds))
    assert re.search(rf"^  FAIL  {re.escape(host)}\b", err, re.M), err
    for phrase in phrases:
        assert phrase in err, f"{phrase!r} not in:\n{err}"
    assert "nothing was launched" in err
    assert_nothing_left(c, [c.worker(1), c.worker(2)], timeout=1)
    return err


def test_preflight_host_without_sshd(pair):
    name = f"{pair.project}-nosshd"
    docker(
        "run",
        "-d",
        "--rm",
        "--network",
        pair.network,
        "--name",
        name,
        f"horovod:{TAG}",
        "sleep",
        "infinity",
    )
    try:
        preflight_fails(
            pair,
            f"-H {pair.worker(1)}:2,{name}:2",
            name,
            "Connection refused",
            f"fix: start sshd on {name}",
        )
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)


def test_preflight_wrong_ssh_port(pair):
    err = preflight_fails(
        pair, "-p 2200", pair.worker(1), "port 2200: Connection refused", "-p/--ssh-port"
    )
    assert re.search(rf"^  FAIL  {pair.worker(2)}\b", err, re.M)


def test_preflight_wrong_key(pair):
    pair.run_ok("rm -f /tmp/other_key*; ssh-keygen -q -t ed25519 -N '' -f /tmp/other_key")
    preflight_fails(
        pair,
        "-i /tmp/other_key",
        pair.worker(1),
        "Permission denied (publickey)",
        "fix: authorize /tmp/other_key",
    )


def test_preflight_version_mismatch(pair):
    meta = (
        "$(python -c 'import importlib.metadata as m; "
        'print(m.distribution("horovod")._path)\')/METADATA'
    )
    rc, out, err, _ = pair.exec(
        pair.worker(2), f"sed -i.orig 's/^Version: .*/Version: 0.0.9/' {meta}"
    )
    assert rc == 0, err
    try:
        preflight_fails(
            pair, "", pair.worker(2), "horovod 0.0.9 (launcher ", "run one image everywhere"
        )
    finally:
        pair.exec(pair.worker(2), f"mv {meta}.orig {meta}")


def test_preflight_unresolvable_host(pair):
    preflight_fails(
        pair,
        f"-H {pair.worker(1)}:2,no-such-worker:2",
        "no-such-worker",
        "host name does not resolve",
        "check the name 'no-such-worker'",
    )
