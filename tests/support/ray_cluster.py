"""Compose Ray clusters of horovod:<tag>-ray (compose/compose.ray.yaml, a head and Ray workers)
for tests/cluster/test_ray.py and benchmarks: the driver runs on the head, jobs of
tests/cluster/jobs at /jobs there. tests/support/compose.py's Cluster with the head in the
launcher's place: every command has a timeout; the owner calls down()."""

import os
import subprocess
import uuid

from tests.support.compose import CLUSTER_DIR, TAG, Cluster, bring_up
from tests.support.paths import ROOT


class RayCluster(Cluster):
    def __init__(self, workers=2, cpus_per_worker=2, extra_files=("compose.ray.test.yaml",)):
        self.workers, self.slots = workers, cpus_per_worker
        self.files = [
            ROOT / "compose" / "compose.ray.yaml",
            *(CLUSTER_DIR / f for f in extra_files),
        ]
        self.project = f"hvdraytest{uuid.uuid4().hex[:8]}"
        self.network = f"{self.project}_ray"
        self.head = self.launcher = f"{self.project}-ray-head-1"
        self.env = dict(
            os.environ,
            HOROVOD_IMAGE_TAG=TAG,
            HOROVOD_RAY_WORKER_CPUS=str(cpus_per_worker),
            HOROVOD_RAY_DASHBOARD_PORT="",  # a free port: clusters side by side
            HOROVOD_TEST_JOBS=str(CLUSTER_DIR / "jobs"),
        )

    def worker(self, i):
        return f"{self.project}-ray-worker-{i}"

    def compose(self, *args, timeout=240):
        return super().compose(*args, timeout=timeout)

    def up(self):
        return self.up_service("ray-worker")

    def driver(self, args, timeout=180):
        """(rc, stdout, stderr, seconds) of `python /jobs/<args>` on the head (the driver)."""
        return self.exec(self.head, f"python /jobs/{args}", timeout)

    def start_driver(self, args):
        """The driver as a background Job (its output collected as it comes)."""
        return self.start(f"python -u /jobs/{args}")

    def hostname(self, container):
        return subprocess.run(
            ["docker", "inspect", "-f", "{{.Config.Hostname}}", container],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()


def make_ray_cluster(workers=2, cpus_per_worker=2):
    return bring_up(RayCluster(workers, cpus_per_worker))
