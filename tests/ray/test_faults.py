"""Faults of the static RayExecutor and its GPU assignment, on a `ray.cluster_utils.Cluster`
of two Ray nodes of 2 CPUs and 2 GPUs each (Ray's own GPU ids: no GPU is needed): a worker
actor killed and a Ray node removed mid-run fail run() within a bound naming the rank and its
node, with nothing left running; use_gpu pins each rank to the GPU Ray gave it, for the static
and the elastic executor. The node removal is the last test (the module's cluster shrinks)."""

import concurrent.futures
import time

import pytest

from tests.ray import rank_fns
from tests.ray.conftest import bounded, ray_nodes, wait_gone

ray = pytest.importorskip("ray", reason="horovod.ray's tests need ray (install-prereqs.sh)")
from horovod.ray import RayExecutor, WorkerFailedError  # noqa: E402

NODES = 2
SETTINGS = dict(timeout_s=120, placement_group_timeout_s=60)
# A lost worker is seen at once on the TCP transport (its sockets close); the bound leaves room
# for the others' grace (runner.FAILURE_GRACE_SECONDS) and a loaded machine.
FAULT_BOUND_SECONDS = 45


@pytest.fixture(scope="module")
def cluster():
    with ray_nodes(*[dict(num_cpus=2, num_gpus=2)] * NODES) as nodes:
        yield nodes


def loop_rows(log_dir):
    try:
        with open(log_dir / "loop.log") as f:
            return [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []


def fail_mid_run(ex, log_dir, fault):
    """ex.run(allreduce_loop) in a thread; fault() here once every rank made a step. Returns
    (the run's WorkerFailedError, seconds from the fault to it)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(ex.run, rank_fns.allreduce_loop, args=[str(log_dir)])
        deadline = time.monotonic() + 120
        while len({row[1] for row in loop_rows(log_dir)}) < ex.size:
            assert time.monotonic() < deadline and not future.done(), "the ranks did not start"
            time.sleep(0.1)
        fault()
        at = time.monotonic()
        with pytest.raises(WorkerFailedError) as info:
            future.result(timeout=FAULT_BOUND_SECONDS + 60)
        return info.value, time.monotonic() - at


def test_use_gpu_pins_each_rank_to_the_gpu_ray_gave_it(cluster):
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_hosts=NODES,
                     num_workers_per_host=2, use_gpu=True, gpus_per_worker=1)  # fmt: skip
    bounded(ex.start)
    try:
        got = bounded(ex.run, rank_fns.gpu_view)
    finally:
        bounded(ex.shutdown)
    check_gpu_views(got)


def test_elastic_use_gpu_pins_each_rank_too(cluster):
    settings = RayExecutor.create_settings(**SETTINGS)
    ex = RayExecutor(settings, min_workers=2, max_workers=4, use_gpu=True, gpus_per_worker=1)
    bounded(ex.start)
    try:
        got = bounded(ex.run, rank_fns.gpu_view)
    finally:
        bounded(ex.shutdown)
    assert len(got) == 4  # the nodes hold 2 GPU workers each
    check_gpu_views(got)


def check_gpu_views(got):
    """Every rank sees its node's GPUs, its own (Ray's) at index local_rank, in one order per
    node; the ranks of a node have different GPUs."""
    for view in got:
        assert len(view["ray_gpu_ids"]) == 1, view
        visible = view["visible"].split(",")
        assert visible[view["local_rank"]] == view["ray_gpu_ids"][0], view
    for node in {v["node"] for v in got}:
        mine = [v for v in got if v["node"] == node]
        assert len({v["visible"] for v in mine}) == 1
        assert sorted(v["ray_gpu_ids"][0] for v in mine) == ["0", "1"]


def test_worker_actor_killed_mid_run_fails_naming_the_rank_and_its_node(cluster, tmp_path):
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_hosts=NODES)
    bounded(ex.start)
    pids = [slot.pid for slot in ex._slots]
    try:
        error, took = fail_mid_run(ex, tmp_path, lambda: ray.kill(ex._workers[1]))
    finally:
        bounded(ex.shutdown)
    slot = ex._slots[1]
    print(f"\nstatic: actor killed -> run() failed in {took:.2f} s: {str(error)[:300]}")
    assert took < FAULT_BOUND_SECONDS
    assert (error.rank, error.node_id) == (1, slot.node_id)
    assert f"rank 1 of 2 (node {slot.label}" in str(error) and "ActorDiedError" in str(error)
    assert wait_gone(pids) == []


def test_ray_node_removed_mid_run_fails_naming_the_rank_and_its_node(cluster, tmp_path):
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_hosts=NODES)
    bounded(ex.start)
    pids = [slot.pid for slot in ex._slots]
    slot = ex._slots[1]
    node = next(n for n in cluster.worker_nodes if n.node_id == slot.node_id)
    try:
        error, took = fail_mid_run(ex, tmp_path, lambda: cluster.remove_node(node))
    finally:
        bounded(ex.shutdown)
    print(f"\nstatic: node removed -> run() failed in {took:.2f} s: {str(error)[:300]}")
    assert took < FAULT_BOUND_SECONDS
    assert (error.rank, error.node_id) == (1, slot.node_id)
    assert f"rank 1 of 2 (node {slot.label}" in str(error)
    assert "Ray node is gone" in str(error)
    assert wait_gone(pids) == []
