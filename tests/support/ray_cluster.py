"""Compose Ray clusters of horovod:<tag>-ray (compose/compose.ray.yaml, a head and Ray workers)
for tests/cluster/test_ray.py and benchmarks: the driver runs on the head, jobs of
tests/cluster/jobs at /jobs there. Every command has a timeout; the owner calls down()."""

import os
import subprocess
import time
import uuid

import pytest

from tests.support.compose import CLUSTER_DIR, TAG, Job
from tests.support.paths import ROOT


class RayCluster:
    def __init__(self, workers=2, cpus_per_worker=2, extra_files=("compose.ray.test.yaml",)):
        self.workers = workers
        self.files = [
            ROOT / "compose" / "compose.ray.yaml",
            *(CLUSTER_DIR / f for f in extra_files),
        ]
        self.project = f"hvdraytest{uuid.uuid4().hex[:8]}"
        self.head = f"{self.project}-ray-head-1"
        self.env = {
            "HOROVOD_IMAGE_TAG": TAG,
            "HOROVOD_RAY_WORKER_CPUS": str(cpus_per_worker),
            "HOROVOD_RAY_DASHBOARD_PORT": "",  # a free port: clusters side by side
            "HOROVOD_TEST_JOBS": str(CLUSTER_DIR / "jobs"),
        }

    def worker(self, i):
        return f"{self.project}-ray-worker-{i}"

    def compose(self, *args, timeout=240):
        files = [a for f in self.files for a in ("-f", str(f))]
        cmd = ["docker", "compose", *files, "-p", self.project, *args]
        p = subprocess.run(
            cmd, env=dict(os.environ, **self.env), capture_output=True, text=True, timeout=timeout
        )
        assert p.returncode == 0, f"{' '.join(args)}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p

    def up(self):
        start = time.monotonic()
        self.compose("up", "-d", "--wait", "--scale", f"ray-worker={self.workers}")
        return time.monotonic() - start

    def down(self):
        try:
            self.compose("down", "-v", "-t", "1", timeout=120)
        except (AssertionError, subprocess.TimeoutExpired) as e:
            print(f"ray cluster {self.project}: down failed: {e}")

    def exec(self, container, cmd, timeout=120):
        """(rc, stdout, stderr, seconds) of `sh -c cmd` in a container."""
        start = time.monotonic()
        try:
            p = subprocess.run(
                ["docker", "exec", container, "sh", "-c", cmd],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            pytest.fail(
                f"`{cmd}` in {container} ran for more than {timeout} s:\n{e.stdout}\n{e.stderr}"
            )
        return p.returncode, p.stdout, p.stderr, time.monotonic() - start

    def driver(self, args, timeout=180):
        """(rc, stdout, stderr, seconds) of `python /jobs/<args>` on the head (the driver)."""
        return self.exec(self.head, f"python /jobs/{args}", timeout)

    def start_driver(self, args):
        """The driver as a background Job (its output collected as it comes)."""
        return Job(["docker", "exec", self.head, "sh", "-c", f"python -u /jobs/{args}"])

    def hostname(self, container):
        return subprocess.run(
            ["docker", "inspect", "-f", "{{.Config.Hostname}}", container],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()

    def processes(self, container, pattern):
        """Command lines of the processes in a container that match pattern (pgrep -af)."""
        rc, out, _, _ = self.exec(container, f"pgrep -af '{pattern}' || true", timeout=30)
        return [line for line in out.splitlines() if "pgrep" not in line]


def make_ray_cluster(workers=2, cpus_per_worker=2):
    c = RayCluster(workers, cpus_per_worker)
    try:
        c.up_seconds = c.up()
    except BaseException:
        c.down()
        raise
    return c
