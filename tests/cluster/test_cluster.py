"""A healthy compose cluster (2 and 3 workers, 2 slots each): horovodrun's preflight, every
collective and dtype across containers, and the training example with identical weights."""

import ipaddress
import os
import re
import subprocess

from tests.support.compose import TAG, TIMINGS, make_cluster
from tests.support.paths import ROOT


def test_launcher_wrote_the_hostfile(cluster):
    out, _ = cluster.run_ok("cat $HOROVOD_HOSTFILE")
    assert out.splitlines() == [
        f"{cluster.worker(i)} slots=2" for i in range(1, cluster.workers + 1)
    ]


def test_selftest_across_containers(cluster):
    out, err = cluster.run_ok("horovodrun python -m horovod.selftest", timeout=180)
    n = 2 * cluster.workers
    assert f"selftest on {n} rank(s): all checks passed" in out, out + err
    # The preflight: one ok line per worker with its address on the compose network, then
    # that network's subnet, chosen.
    subnet = ipaddress.ip_network(
        subprocess.run(
            [
                "docker",
                "network",
                "inspect",
                "-f",
                "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
                cluster.network,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for i in range(1, cluster.workers + 1):
        m = re.search(
            rf"^  ok    {cluster.worker(i)}  ssh [0-9.]+ s  horovod \S+  python 3\.11\.\d+  "
            rf"tensorflow \S+  open-mpi 4\.1\.\d+  /dev/shm 1\.0 GiB  eth0 (\S+)$",
            err,
            re.M,
        )
        assert m and ipaddress.ip_interface(m.group(1)).network == subnet, err
    assert f"  network: {subnet} (the subnet the host names resolve to; interface eth0)" in err, err


def test_every_dtype_across_containers(cluster):
    out, err = cluster.run_ok("horovodrun python /jobs/allreduce_dtypes.py", timeout=180)
    ok = re.findall(r"^OK dtypes rank=(\d+) host=(\S+)$", out, re.M)
    assert sorted(int(r) for r, _ in ok) == list(range(2 * cluster.workers)), out + err
    # Two ranks on every worker (mpirun's --map-by slot fills each host in turn).
    hosts = sorted(h for _, h in ok)
    assert len(set(hosts)) == cluster.workers and all(hosts.count(h) == 2 for h in hosts)
    # Several hosts of two ranks each: auto takes the hierarchical paths above 32 KiB.
    algorithms = re.search(r"^\[horovod summary\] algorithms: (.*)$", err, re.M)
    assert algorithms, err
    assert re.match(
        r"allreduce direct \d+, hierarchical \d+; allgather hierarchical \d+; hierarchical "
        rf"allreduce on \({cluster.workers} host\(s\) x 2 rank\(s\)\)",
        algorithms.group(1),
    ), algorithms.group(1)


def test_uneven_hosts_take_the_flat_ring(cluster):
    """One rank fewer than the slots: the last worker holds one rank, the others two. Asked for
    hierarchical, the engine says why not and the flat ring gives the same answers."""
    n = 2 * cluster.workers - 1
    out, err = cluster.run_ok(
        f"horovodrun -np {n} --hierarchical-allreduce --hierarchical-allgather "
        "python /jobs/allreduce_dtypes.py",
        timeout=180,
    )
    assert len(re.findall(r"^OK dtypes rank=\d+", out, re.M)) == n, out + err
    why = "hosts hold 1 to 2 ranks each; hierarchical needs the same number on every host"
    assert re.search(rf"WARNING.*hierarchical allreduce off \({why}", err), err
    assert re.search(
        r"^\[horovod summary\] algorithms: allreduce direct \d+, ring \d+; "
        r"allgather ring \d+; ",
        err,
        re.M,
    ), err


def test_training_example_across_containers(cluster):
    out, err = cluster.run_ok(
        "horovodrun python /opt/horovod/examples/tensorflow2_keras_digits.py --epochs 3",
        timeout=600,
    )
    rows = re.findall(
        r"^rank (\d+) on (\S+): test accuracy ([0-9.]+), [0-9,]+ samples/s, weights (\w+)$",
        out,
        re.M,
    )
    assert len(rows) == 2 * cluster.workers, out + err
    assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{out}"
    assert len({h for _, h, _, _ in rows}) == cluster.workers
    assert float(rows[0][2]) > 0.8, out


def test_bring_up_to_first_allreduce():
    """`docker compose up` of 2 workers to the first allreduce across them, reported."""
    import time

    start = time.monotonic()
    c = make_cluster(2)
    try:
        c.run_ok(
            "horovodrun python -c 'import numpy as np, horovod.numpy as hvd; hvd.init(); "
            'assert hvd.allreduce(np.ones(4), op=hvd.Sum, name="first")[0] == hvd.size()\''
        )
        total = time.monotonic() - start
    finally:
        c.down()
    TIMINGS.append(("2 workers: compose up", c.up_seconds))
    TIMINGS.append(("2 workers: compose up to the first allreduce", total))


def _compose_up(project, cwd, extra_env, timeout=300):
    """Plain `docker compose up --abort-on-container-exit` from compose/, as a user runs it."""
    env = {**os.environ, "HOROVOD_IMAGE_TAG": TAG, **extra_env}
    try:
        return subprocess.run(
            ["docker", "compose", "-p", project, "up", "--abort-on-container-exit"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        subprocess.run(
            ["docker", "compose", "-p", project, "down", "-v", "-t", "1"],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=120,
        )


def test_compose_up_returns_the_jobs_exit_code():
    """From inside compose/, default 2 workers: the launcher's command runs across them and
    `up --abort-on-container-exit` exits with its code."""
    p = _compose_up(
        "hvdtestup",
        ROOT / "compose",
        {
            "HOROVOD_CLUSTER_COMMAND": "horovodrun python -c 'import horovod.numpy as hvd, sys; "
            "hvd.init(); sys.exit(5 if hvd.size() == 4 else 1)'"
        },
    )
    assert p.returncode == 5, p.stdout + p.stderr
    assert re.search(
        r"cluster: 2 worker\(s\) in [0-9.]+ s: hvdtestup-worker-1 .*, hvdtestup-worker-2 ",
        p.stdout + p.stderr,
    ), p.stdout + p.stderr


def test_missing_image_says_how_to_build_it():
    p = _compose_up(
        "hvdtestmissing", ROOT / "compose", {"HOROVOD_IMAGE_TAG": "no-such-tag"}, timeout=120
    )
    assert p.returncode != 0
    assert "never pulled. Run `make images`" in p.stdout + p.stderr, p.stdout + p.stderr
    assert "Pulling" not in p.stdout + p.stderr
