"""horovod.ray's tests run real Ray: a local instance (`ray.init(num_cpus=4)`), or a
`ray.cluster_utils.Cluster` of several Ray nodes on this machine, one per test module. The
modules are skipped, saying so, where ray is not installed (scripts/install-prereqs.sh)."""

import contextlib
import os
import time
from pathlib import Path

import pytest

from tests.support import launched

# One call: actors start (fresh Python processes), ranks meet, fn runs; a minute under load.
CALL_LIMIT_SECONDS = 240


def ray_env():
    """The actors import horovod from the tree, as the test process does (a local Ray's
    workers inherit the driver's environment)."""
    root = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray", reason="horovod.ray's tests need ray (install-prereqs.sh)")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", ray_env())
        env.setenv("RAY_AUTH_MODE", "disabled")  # a throw-away local instance
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=True)
        try:
            yield ray
        finally:
            ray.shutdown()


@contextlib.contextmanager
def ray_nodes(*nodes):
    """A `ray.cluster_utils.Cluster` of this machine, connected: a head without CPUs (nothing
    is placed there) and one Ray node per dict of `add_node` arguments in `nodes`. Shut down
    when the block ends."""
    import ray
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", ray_env())
        env.setenv("RAY_AUTH_MODE", "disabled")
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
        )
        try:
            for node in nodes:
                cluster.add_node(**node)
            ray.init(address=cluster.address)
            cluster.wait_for_nodes()
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()


def bounded(call, *args, limit=CALL_LIMIT_SECONDS, **kwargs):
    """call(*args, **kwargs), failing the test after `limit` seconds (tests/support/launched.py)."""
    return launched.bounded(call, *args, limit=limit, **kwargs)


def alive(pid):
    """True while process `pid` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout=30.0):
    """The pids still running after up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if alive(p)]
    return left


def live_groups(ray):
    """Placement groups Ray still holds (not removed)."""
    from ray.util import placement_group_table

    return [g for g in placement_group_table().values() if g["state"] != "REMOVED"]
