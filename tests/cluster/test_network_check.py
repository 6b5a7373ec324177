"""`horovodrun --check-network` on real compose clusters: a healthy cluster, one worker's link
throttled (tc tbf inside the worker, NET_ADMIN granted by this test's compose override only),
a slower interface forced with --network-interface, a worker that stops answering mid-check;
and the engine's end-of-job summary across containers."""

import os
import re
import subprocess
import time

import pytest

from tests.support.compose import TIMINGS, check_network_matrix, make_cluster

pytestmark = pytest.mark.alone

RATE_MBIT = 400  # the throttle: 400 Mbit/s = 0.05 GB/s
RATE_GBS = RATE_MBIT / 8 / 1000


def gbs(text):
    """GB/s of a report cell or line."""
    return float(text)


def check(c, flags="", timeout=300):
    out, err = c.run_ok(f"horovodrun --check-network {flags}", timeout=timeout)
    return out, err


def test_healthy_cluster_is_ok(cluster):
    out, err = check(cluster)
    workers = [cluster.worker(i) for i in range(1, cluster.workers + 1)]
    for title in ("latency", "bandwidth"):
        cells = check_network_matrix(out, title)
        assert set(cells) == {(a, b) for a in workers for b in workers}, out
        assert all(v != "-" for v in cells.values()), (
            out
        )  # every pair, and each host's shared memory
    assert "slow link" not in out and "warning" not in out, out
    for size in ("4 KiB", "1 MiB", "64 MiB"):
        assert re.search(rf"^ +{size}: +[0-9.]+ us +[0-9.]+ GB/s$", out, re.M), out
    reach = re.search(r"^allreduce reaches (\d+)% of what the links allow", out, re.M)
    assert reach, out
    # The links all busy at once, as the ring keeps them: measured for every host to the next.
    at_once = re.search(
        r"^links at once \(.*\): slowest ([0-9.]+) GB/s \((\S+) -> (\S+)\), (\d+)% of the slowest "
        r"link alone$",
        out,
        re.M,
    )
    assert at_once and float(at_once.group(1)) > 0, out
    assert at_once.group(2) in workers and at_once.group(3) in workers, out
    assert re.search(r"^allreduce reaches \d+% .*, \d+% of what they carry all at once$", out, re.M)
    if int(at_once.group(4)) < 70:
        assert "cause: the links slow each other down" in out, out
    # Healthy links: the verdict turns on how close allreduce comes to them (the containers
    # share this machine's cores, so it may not), and then names the cause it sees.
    verdict = re.search(r"^verdict: (.*)$", out, re.M).group(1)
    if int(reach.group(1)) >= 85:
        assert verdict.startswith("OK: every link between hosts within 1.45x of the median"), out
    else:
        assert verdict.startswith(
            f"WARN: allreduce reaches {reach.group(1)}% of what the links allow ("
        ), out
    # The containers share this machine (one boot id) and its cores are fewer than the ranks:
    # named in the report and before the launch, and the ranks are made to yield.
    ranks = cluster.workers * cluster.slots
    cores = len(os.sched_getaffinity(0))
    if ranks > cores:
        named = f"hosts {', '.join(workers)} share one machine with {cores} core(s) and {ranks}"
        assert f"cause: oversubscribed: {named}" in out, out
        assert f"horovodrun: oversubscribed: {named}" in err, err
    # The slowest link is kept on the launcher, and a later job on the same hosts compares its
    # own allreduce with it in the end-of-job summary.
    slowest = re.search(
        r"^links: slowest ([0-9.]+) GB/s between hosts \(\S+ -> \S+\), ([0-9.]+) GB/s all at once;",
        out,
        re.M,
    )
    assert slowest, out
    assert "horovodrun: kept the slowest link for later jobs on these hosts" in err, err
    job = (
        "python -c 'import numpy as np, horovod.numpy as hvd; hvd.init(); "
        '[hvd.allreduce(np.ones(1 << 22, np.float32), name="l%d" % i) for i in range(5)]\''
    )
    _, err = cluster.run_ok(f"horovodrun {job}")
    link, together = float(slowest.group(1)), float(slowest.group(2))
    assert (
        f"horovodrun: slowest link between these hosts {link:.3g} GB/s, {together:.3g} GB/s all "
        "at once" in err
    ), err
    line = re.search(
        r"^\[horovod summary\] allreduce reaches \d+ % of what the links allow \(bus bandwidth "
        r"[0-9.e-]+ GB/s; slowest link ([0-9.]+) GB/s \(HOROVOD_LINK_GBPS\)\), \d+ % of what "
        r"they carry all at once \(([0-9.]+) GB/s \(HOROVOD_LINK_AT_ONCE_GBPS\)\)"
        r"(; likely cause: .+)?$",
        err,
        re.M,
    )
    assert line and abs(float(line.group(1)) - link) <= 0.006, err
    assert abs(float(line.group(2)) - together) <= 0.006, err


def test_hierarchical_off_is_named_as_a_cause(cluster):
    """Several hosts of two ranks with the hierarchical allreduce turned off: the report names
    that as a cause of the gap between allreduce and the links."""
    if cluster.workers != 2:
        pytest.skip("one cluster shape is enough (the 2-worker one is the cheaper)")
    out, _ = cluster.run_ok(
        "HOROVOD_HIERARCHICAL_ALLREDUCE=0 horovodrun --check-network --check-seconds 0.5",
        timeout=300,
    )
    assert "cause: HOROVOD_HIERARCHICAL_ALLREDUCE=0 on 2 hosts of 2 ranks" in out, out


def test_cpu_quota_and_small_shm_are_named():
    """Two workers of two ranks, each under `cpus: 1` and with a 128 MiB /dev/shm: the report
    names both causes (the quota as the cores, 1 where the machine has more)."""
    c = make_cluster(2, extra_files=["compose.quota.yaml"], env={"HOROVOD_SHM_SIZE": "128m"})
    try:
        out, err = c.run_ok("horovodrun --check-network --check-seconds 0.5", timeout=300)
    finally:
        c.down()
    workers = [c.worker(i) for i in (1, 2)]
    assert re.search(r"^cause: oversubscribed: .* with 1 core\(s\) and 4 rank\(s\)", out, re.M), out
    for w in workers:
        assert f"cause: /dev/shm on {w} is only 128 MiB for its 2 ranks" in out, out
        assert re.search(rf"{w}.*/dev/shm is only 128", err), err  # the preflight's warning


def throttle(c, worker, device="eth0"):
    rc, out, err, _ = c.exec(
        worker,
        f"tc qdisc replace dev {device} root tbf rate {RATE_MBIT}mbit burst 64kb latency 200ms",
    )
    assert rc == 0, f"tc in {worker}: {out}{err}"


@pytest.fixture(scope="module")
def netadmin3():
    c = make_cluster(3, extra_files=["compose.netadmin.yaml"])
    yield c
    c.down()


def device_in(c, container, network):
    """The interface of container that is attached to the docker network."""
    subnet = subprocess.run(
        ["docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", network],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    addr = c.address(container, network)
    rc, out, _, _ = c.exec(container, "ip -o -4 addr show")
    dev = next(line.split()[1] for line in out.splitlines() if f" {addr}/" in line)
    return dev, subnet


def test_throttled_worker_links_are_named(netadmin3):
    c = netadmin3
    slow = c.worker(3)
    dev, _ = device_in(c, slow, c.network)
    throttle(c, slow, dev)
    try:
        out, err = check(c, f"--network-interface {dev}")
    finally:
        c.exec(slow, f"tc qdisc del dev {dev} root")
    named = re.findall(
        r"^slow link: (\S+) -> (\S+): ([0-9.]+) GB/s, median ([0-9.]+) GB/s$", out, re.M
    )
    # tbf shapes what the worker sends: exactly its two outgoing links are slow.
    assert sorted((a, b) for a, b, _, _ in named) == [(slow, c.worker(1)), (slow, c.worker(2))], out
    for _, _, value, _ in named:
        assert abs(gbs(value) - RATE_GBS) <= 0.3 * RATE_GBS, (
            f"{value} GB/s vs the {RATE_GBS} GB/s throttle\n{out}"
        )
    assert re.search(rf"^verdict: WARN: 2 slow link\(s\).*most involved: {slow}\)", out, re.M), out


def test_faster_interface_is_named_when_a_slow_one_is_forced(netadmin3):
    c = netadmin3
    second = f"{c.project}_second"
    fast_dev, fast_net = device_in(c, c.worker(1), c.network)
    devices = {c.worker(i): device_in(c, c.worker(i), second) for i in (1, 2, 3)}
    for w, (dev, _) in devices.items():
        throttle(c, w, dev)
    try:
        slow_net = devices[c.worker(1)][1]
        out, err = check(c, f"--network-interface {slow_net}")
    finally:
        for w, (dev, _) in devices.items():
            c.exec(w, f"tc qdisc del dev {dev} root")
    warnings = re.findall(
        r"^warning: (\S+): the job's interface \S+ \((\S+)\) carries [0-9.]+ GB/s, "
        r"but (\S+) \((\S+)\) carries [0-9.]+ GB/s: use --network-interface (\S+)$",
        out,
        re.M,
    )
    assert {w[0] for w in warnings} == {c.worker(i) for i in (1, 2, 3)}, out
    assert all(w[1] == slow_net and w[3] == fast_net for w in warnings), out
    assert "verdict: WARN: a faster interface" in out, out


def test_a_worker_that_stops_answering_is_named(fresh_cluster):
    c = fresh_cluster
    job = c.start("horovodrun --check-network --check-seconds 2 --check-step-timeout 5")
    job.wait_for(r"ranks started on 2 host\(s\); measuring", 120)
    time.sleep(3)
    subprocess.run(["docker", "pause", c.worker(2)], capture_output=True, timeout=60, check=True)
    try:
        rc, seconds = job.wait(7 + 15 + 20)  # step bound, horovodrun's abort grace, slack
        TIMINGS.append(("--check-network, worker paused: ended after", seconds))
    finally:
        subprocess.run(["docker", "unpause", c.worker(2)], capture_output=True, timeout=60)
    assert rc != 0, job.output
    assert re.search(
        rf"rank [23] on {c.worker(2)} (did not answer|stopped sending) within 7 s", job.output
    ), job.output


def test_end_of_job_summary_across_containers(cluster):
    """10 allreduces of 1 MiB: the summary counts exactly 10 MiB reduced per rank."""
    job = (
        "python -c 'import numpy as np, horovod.numpy as hvd; hvd.init(); "
        '[hvd.allreduce(np.ones(1 << 18, np.float32), name="s%d" % i) for i in range(10)]\''
    )
    out, err = cluster.run_ok(f"horovodrun {job}")
    n = 2 * cluster.workers
    assert re.search(
        rf"^\[horovod summary\] {n} ranks on {cluster.workers} hosts over mpi, .*: .*; "
        rf"{10 << 20} bytes reduced per rank",
        err,
        re.M,
    ), err
    out, err = cluster.run_ok(f"HOROVOD_SUMMARY=0 horovodrun {job}")
    assert "[horovod summary]" not in out + err
