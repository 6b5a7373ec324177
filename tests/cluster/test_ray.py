"""horovod.ray.RayExecutor on a real compose Ray cluster (compose/compose.ray.yaml: a head and
two Ray workers of 2 CPUs, horovod:<tag>-ray): ranks across both workers, a failing fn, nothing
left behind, a Ray worker container killed mid-run. The drivers are tests/cluster/jobs/
ray_executor.py, run on the head; one cluster for the module, broken by the last test."""

import json
import subprocess
import time

import pytest

from tests.support.compose import TIMINGS
from tests.support.ray_cluster import make_ray_cluster

ACTOR = "^ray::BaseHorovodWorker"  # the title of a rank's actor process (its start)
# A killed Ray worker: run() must fail within this many seconds, naming it.
KILL_BOUND_S = 60


@pytest.fixture(scope="module")
def ray_cluster():
    c = make_ray_cluster(workers=2, cpus_per_worker=2)
    TIMINGS.append(("ray cluster up (head + 2 workers)", c.up_seconds))
    c.hosts = {c.hostname(c.worker(i)): c.worker(i) for i in (1, 2)}
    yield c
    c.down()


def result_of(out):
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no RESULT line in:\n{out}"
    return json.loads(lines[-1][len("RESULT ") :])


def assert_no_actor_left(cluster, within=20):
    """No rank's actor process on any Ray worker, waiting up to `within` s (Ray ends killed
    actors asynchronously)."""
    deadline = time.monotonic() + within
    while True:
        left = {w: cluster.processes(w, ACTOR) for w in cluster.hosts.values()}
        left = {w: p for w, p in left.items() if p}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not left, f"actor processes left {within} s later: {left}"


@pytest.fixture(scope="module")
def views_job(ray_cluster):
    rc, out, err, seconds = ray_cluster.driver("ray_executor.py views", timeout=240)
    assert rc == 0, f"rc={rc}\n{out}\n{err}"
    result = result_of(out)
    TIMINGS.append(("ray views job", seconds))
    TIMINGS.append(("RayExecutor.start(), 4 workers", result["start_s"]))
    TIMINGS.append(("RayExecutor.run(trivial), 4 workers", result["trivial_s"]))
    return result


def test_ranks_across_both_ray_workers(ray_cluster, views_job):
    """num_workers=4 packs 2 ranks on each Ray worker (the head has no CPU): ranks in order,
    consecutive on a node, local ranks by node, and their allreduce."""
    views = views_job["views"]
    assert [v["rank"] for v in views] == [0, 1, 2, 3]
    assert {v["size"] for v in views} == {4}
    hosts = [v["host"] for v in views]
    assert set(hosts) == set(ray_cluster.hosts), (hosts, ray_cluster.hosts)
    assert hosts[0] == hosts[1] and hosts[2] == hosts[3] and hosts[0] != hosts[2], hosts
    assert [v["local_rank"] for v in views] == [0, 1, 0, 1]
    assert {v["local_size"] for v in views} == {2}
    assert [v["cross_rank"] for v in views] == [0, 0, 1, 1]
    assert {v["cross_size"] for v in views} == {2}
    assert len({v["node_id"] for v in views}) == 2
    assert all(v["sum"] == [10.0] * 3 for v in views), views


def test_fn_raising_on_one_worker_names_it(views_job):
    error = views_job["error"]
    assert error and error["type"] == "WorkerFailedError", error
    assert error["rank"] == 2
    bad = views_job["views"][2]
    assert error["host"] == bad["host"] and error["node_id"] == bad["node_id"], error
    message = error["message"]
    assert "rank 2 of 4" in message and "ValueError" in message, message
    assert "fn failed on purpose on rank 2" in message, message
    trace = error["remote_traceback"]
    assert "fail_on_purpose" in trace and "raise_on" in trace, trace


def test_nothing_left_after_shutdown(ray_cluster, views_job):
    assert_no_actor_left(ray_cluster)


def test_nothing_left_after_a_failed_driver(ray_cluster):
    """A driver that ends with the error (no shutdown()): Ray ends its job's actors."""
    rc, out, err, _ = ray_cluster.driver("ray_executor.py raise", timeout=180)
    assert rc != 0, out
    assert "WorkerFailedError" in err and "rank 1 of 2" in err, err
    assert "fn failed on purpose on rank 1" in err, err
    assert_no_actor_left(ray_cluster)


def test_killed_ray_worker_fails_the_run_naming_it(ray_cluster):
    """`docker kill` of the Ray worker running ranks 2 and 3 mid-run: run() raises within
    KILL_BOUND_S naming a rank of that worker and its host; the survivors end too."""
    job = ray_cluster.start_driver("ray_executor.py kill --seconds 120")
    job.wait_for(r"^READY ", timeout=180)
    hosts = json.loads(job.output.split("READY ", 1)[1].splitlines()[0])
    victim = ray_cluster.hosts[hosts[2]]
    time.sleep(2)  # the ranks are in their allreduces
    killed_at = time.time()
    subprocess.run(["docker", "kill", victim], check=True, capture_output=True, timeout=30)
    rc, _ = job.wait(KILL_BOUND_S + 30)
    result = result_of(job.output)
    error = result["error"]
    assert error, f"the run did not fail: {result}"
    seconds = error["at"] - killed_at
    TIMINGS.append(("killed Ray worker -> run() raised", seconds))
    assert seconds < KILL_BOUND_S, f"run() raised {seconds:.1f} s after the kill: {error}"
    assert error["rank"] in (2, 3) and error["host"] == hosts[2], error
    assert hosts[2] in error["message"], error["message"]
    survivor = ray_cluster.hosts[hosts[0]]
    deadline = time.monotonic() + 20
    while ray_cluster.processes(survivor, ACTOR) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ray_cluster.processes(survivor, ACTOR), "actors left on the surviving worker"
