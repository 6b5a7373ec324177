"""horovod.ray.RayExecutor across several Ray nodes on this machine
(`ray.cluster_utils.Cluster`: a head without CPUs and two nodes of 2 CPUs, raylets of their
own): num_hosts places one bundle per node, a node's ranks are consecutive, local and cross
ranks follow the nodes, and the ranks reduce across them."""

import pytest

from tests.ray import rank_fns
from tests.ray.conftest import bounded, ray_nodes

ray = pytest.importorskip("ray", reason="horovod.ray's tests need ray (install-prereqs.sh)")
from horovod.ray import PlacementTimeoutError, RayExecutor  # noqa: E402

NODES, CPUS_PER_NODE = 2, 2


@pytest.fixture(scope="module")
def cluster():
    with ray_nodes(*[dict(num_cpus=CPUS_PER_NODE)] * NODES) as nodes:
        yield nodes


def test_num_hosts_puts_each_hosts_ranks_on_one_node(cluster):
    settings = RayExecutor.create_settings(timeout_s=120, placement_group_timeout_s=60)
    ex = RayExecutor(settings, num_hosts=NODES, num_workers_per_host=2)
    bounded(ex.start)
    try:
        got = bounded(ex.run, rank_fns.rank_view, args=["nodes"])
    finally:
        bounded(ex.shutdown)
    assert [r["rank"] for r in got] == [0, 1, 2, 3]
    nodes = [slot.node_id for slot in ex._slots]
    assert nodes[0] == nodes[1] != nodes[2] == nodes[3]  # consecutive ranks per node
    assert [(r["local_rank"], r["local_size"]) for r in got] == [(0, 2), (1, 2)] * 2
    assert [(r["cross_rank"], r["cross_size"]) for r in got] == [(0, 2), (0, 2), (1, 2), (1, 2)]
    assert all(r["sum"] == [6.0, 10.0, 14.0] for r in got)


def test_num_workers_packs_and_orders_ranks_by_node(cluster):
    settings = RayExecutor.create_settings(timeout_s=120, placement_group_timeout_s=60)
    ex = RayExecutor(settings, num_workers=3)
    bounded(ex.start)
    try:
        got = bounded(ex.run, rank_fns.rank_view, args=["pack"])
    finally:
        bounded(ex.shutdown)
    nodes = [slot.node_id for slot in ex._slots]
    assert len(set(nodes)) == 2 and nodes == sorted(nodes, key=nodes.index)  # grouped
    sizes = [nodes.count(n) for n in nodes]
    assert [r["local_size"] for r in got] == sizes
    assert [r["rank"] for r in got] == [0, 1, 2]


def test_more_hosts_than_nodes_names_the_request(cluster):
    settings = RayExecutor.create_settings(placement_group_timeout_s=3)
    ex = RayExecutor(settings, num_hosts=3, num_workers_per_host=1)
    with pytest.raises(PlacementTimeoutError, match=r"3 bundle\(s\) of CPU 1 \(STRICT_SPREAD"):
        bounded(ex.start, limit=120)
