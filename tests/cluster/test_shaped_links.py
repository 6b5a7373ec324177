"""Shaped links (compose/compose.shaped.yaml, docs/shaped-links.md): a 3-worker cluster at
HOROVOD_LINK_RATE=400mbit with worker 3 at its own 200mbit (HOROVOD_LINK_RATES): each worker
shows its rate (`make cluster-ps`, its log), raw TCP between workers (iperf3 from the host)
carries it, jobs run but cannot change it; and a cluster without the knob has no NET_ADMIN and
the default queue."""

import re
import shutil
import subprocess

import pytest

from tests.support.compose import TIMINGS, Cluster, make_cluster
from tests.support.paths import ROOT

RATE, SLOW = 400, 200  # Mbit/s: every worker's, worker 3's own
NET_ADMIN = 1 << 12  # its bit in /proc/<pid>/status's capability masks
SHAPED = str(ROOT / "compose" / "compose.shaped.yaml")


@pytest.fixture(scope="module")
def shaped():
    c = make_cluster(
        3,
        extra_files=[SHAPED],
        env={"HOROVOD_LINK_RATE": f"{RATE}mbit", "HOROVOD_LINK_RATES": f"3={SLOW}mbit"},
    )
    TIMINGS.append(("shaped links: 3-worker cluster up", c.up_seconds))
    yield c
    c.down()


def cluster_ps(c):
    """{worker: (NET_ADMIN, rate, qdisc)} of `make cluster-ps` on c."""
    p = subprocess.run(
        ["make", "--no-print-directory", "cluster-ps", f"CLUSTER={c.project}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split(None, 4) for line in p.stdout.splitlines()[1:]]
    return {w: (admin, rate, rest) for w, _, admin, rate, rest in rows}


def iperf_mbits(src, dst, port=5301):
    """Mbit/s that dst received from src over 5 s (scripts/iperf_lib.sh)."""
    assert shutil.which("iperf3"), "iperf3 on the host (scripts/install-prereqs.sh)"
    script = (
        f"source scripts/iperf_lib.sh; trap 'iperf_stop {dst} {port}' EXIT; "
        f"iperf_serve {dst} {port} && iperf_mbits {src} {dst} {port}"
    )
    p = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return float(p.stdout.split()[-1])


def caps(c, container, pid="1"):
    """(effective, bounding) capability masks of a process in container."""
    rc, out, err, _ = c.exec(container, f"grep -E '^Cap(Eff|Bnd)' /proc/{pid}/status")
    assert rc == 0, out + err
    masks = dict(line.split(":") for line in out.splitlines())
    return int(masks["CapEff"], 16), int(masks["CapBnd"], 16)


def test_every_worker_shows_its_rate(shaped):
    c = shaped
    rows = cluster_ps(c)
    want = {c.worker(1): RATE, c.worker(2): RATE, c.worker(3): SLOW}
    assert sorted(rows) == sorted(want), rows
    for w, mbit in want.items():
        admin, rate, qdisc = rows[w]
        assert (admin, rate) == ("yes", f"{mbit}Mbit"), rows[w]
        # The default bucket: 10 ms at the rate.
        assert qdisc.startswith(f"tbf burst {mbit * 1250}b lat 20ms;"), rows[w]
        # The worker found its own name (Docker's DNS) and said what it set, before sshd started.
        p = subprocess.run(["docker", "logs", w], capture_output=True, text=True, timeout=30)
        log = p.stdout + p.stderr
        said = re.search(rf"^horovod link: {w} eth0: qdisc tbf .* rate {mbit}Mbit ", log, re.M)
        assert said, log


def test_tcp_carries_the_rate(shaped):
    c = shaped
    for src, dst, mbit in ((1, 2, RATE), (3, 1, SLOW)):
        got = iperf_mbits(c.worker(src), c.worker(dst))
        print(f"iperf3 worker {src} -> {dst}: {got} Mbit/s at {mbit}mbit ({got / mbit:.2f})")
        assert 0.85 * mbit <= got <= 1.0 * mbit, f"worker {src} -> {dst}: {got} Mbit/s of {mbit}"


def test_jobs_run_but_hold_no_net_admin(shaped):
    c = shaped
    job = (
        "python -c 'import numpy as np, horovod.numpy as hvd; hvd.init(); "
        'x = hvd.allreduce(np.ones(1 << 20, np.float32), op=hvd.Sum); print("sum", x[0])\''
    )
    out, err = c.run_ok(f"horovodrun -np 2 -H {c.worker(1)}:1,{c.worker(3)}:1 {job}", timeout=180)
    assert out.count("sum 2.0") == 2, out + err
    # tini (PID 1) was granted NET_ADMIN; sshd and its sessions lost it for good (the bounding set).
    rc, pid, _, _ = c.exec(c.worker(1), "pgrep -o -x sshd")
    assert rc == 0 and caps(c, c.worker(1))[0] & NET_ADMIN, pid
    assert not any(m & NET_ADMIN for m in caps(c, c.worker(1), pid.strip())), pid
    rc, out, err, _ = c.run(f"ssh {c.worker(1)} /sbin/tc qdisc del dev eth0 root")
    assert rc != 0 and "Operation not permitted" in out + err, (rc, out, err)
    assert cluster_ps(c)[c.worker(1)][1] == f"{RATE}Mbit"


def test_without_the_knob_nothing_changes():
    c = make_cluster(2)
    try:
        rows = cluster_ps(c)
        for i in (1, 2):
            w = c.worker(i)
            added = subprocess.run(
                ["docker", "inspect", "-f", "{{.HostConfig.CapAdd}}", w],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
            assert "NET_ADMIN" not in added, added
            assert not any(m & NET_ADMIN for m in caps(c, w)), w
            rc, out, err, _ = c.exec(w, "tc qdisc show")
            # Docker's default: no queue on the veth, none but the loopback's besides.
            assert rc == 0 and re.findall(r"^qdisc (\S+) 0: dev (\S+) root", out, re.M) == [
                ("noqueue", "lo"),
                ("noqueue", "eth0"),
            ], out + err
            assert rows[w][:2] == ("no", "unshaped") and rows[w][2].startswith("noqueue;"), rows
    finally:
        c.down()


def test_a_rate_tc_cannot_read_stops_the_worker():
    """A worker never runs unshaped when a rate was asked for: it ends, and says why."""
    c = Cluster(1, extra_files=[SHAPED], env={"HOROVOD_LINK_RATE": "400mbits"})
    try:
        with pytest.raises(AssertionError, match=r"exited \(1\)"):
            c.compose("up", "-d", "--wait", "worker", timeout=60)  # no launcher to wait for
        log = c.compose("logs", "--no-log-prefix", "worker").stdout
        assert "horovod link: cannot read rate '400mbits'" in log, log
    finally:
        c.down()
