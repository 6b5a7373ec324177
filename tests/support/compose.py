"""Compose clusters of horovod:<tag> containers (sshd workers + launcher) for tests/cluster,
brought up by compose/compose.yaml with tests/cluster/compose.test.yaml on top. Every command has
a timeout; a cluster's owner takes it down (with its key volumes) with down()."""

import os
import re
import subprocess
import threading
import time
import uuid

import pytest

from tests.support.paths import ROOT

CLUSTER_DIR = ROOT / "tests" / "cluster"  # the compose overrides and the jobs mounted at /jobs
TAG = os.environ.get("IMAGE_TAG") or "latest"
TIMINGS = []  # (what, seconds), printed at the end of the run (tests/cluster/conftest.py)


class Cluster:
    def __init__(self, workers, slots=2, extra_files=(), env=None):
        self.workers, self.slots = workers, slots
        self.files = [
            ROOT / "compose" / "compose.yaml",
            CLUSTER_DIR / "compose.test.yaml",
            *(CLUSTER_DIR / f for f in extra_files),
        ]
        self.project = f"hvdtest{uuid.uuid4().hex[:8]}"
        self.network = f"{self.project}_cluster"
        self.launcher = f"{self.project}-launcher-1"
        self.env = dict(
            os.environ,
            HOROVOD_IMAGE_TAG=TAG,
            HOROVOD_CLUSTER_COMMAND="sleep infinity",
            HOROVOD_SLOTS_PER_WORKER=str(slots),
            HOROVOD_TEST_JOBS=str(CLUSTER_DIR / "jobs"),
        )
        self.env.update(env or {})  # e.g. HOROVOD_IMAGE, HOROVOD_WORKSPACE

    def worker(self, i):
        return f"{self.project}-worker-{i}"

    def compose(self, *args, timeout=180):
        cmd = [
            "docker",
            "compose",
            *(a for f in self.files for a in ("-f", str(f))),
            "-p",
            self.project,
            *args,
        ]
        p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, f"{' '.join(args)}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
        return p

    def up(self):
        return self.up_service("worker")

    def up_service(self, workers):
        """`up --wait` with self.workers of the service `workers`; the seconds it took."""
        start = time.monotonic()
        self.compose("up", "-d", "--wait", "--scale", f"{workers}={self.workers}")
        return time.monotonic() - start

    def down(self):
        subprocess.run(
            [
                "docker",
                "compose",
                *(a for f in self.files for a in ("-f", str(f))),
                "-p",
                self.project,
                "down",
                "-v",
                "-t",
                "1",
            ],
            env=self.env,
            capture_output=True,
            timeout=120,
        )

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

    def run(self, cmd, timeout=120):
        return self.exec(self.launcher, cmd, timeout)

    def run_ok(self, cmd, timeout=120):
        rc, out, err, _ = self.run(cmd, timeout)
        assert rc == 0, f"`{cmd}`: rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
        return out, err

    def start(self, cmd):
        """A background job in the launcher (a Job)."""
        return Job(["docker", "exec", self.launcher, "sh", "-c", cmd])

    def address(self, container, network=None):
        """The container's IPv4 address on `network` (default: this cluster's)."""
        return subprocess.run(
            [
                "docker",
                "inspect",
                "-f",
                f'{{{{(index .NetworkSettings.Networks "{network or self.network}").IPAddress}}}}',
                container,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()

    def processes(self, container, pattern):
        """Command lines of the processes in a container that match pattern (pgrep -af)."""
        rc, out, _, _ = self.exec(container, f"pgrep -af '{pattern}' || true", timeout=30)
        return [line for line in out.splitlines() if "pgrep" not in line]


class Job:
    """A running command whose output (stdout and stderr together) is collected as it comes."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self):
        return "".join(self.lines)

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.output, re.M):
                return
            if self.proc.poll() is not None:
                self.reader.join(5)
                if re.search(pattern, self.output, re.M):
                    return
                pytest.fail(
                    f"job ended (rc={self.proc.returncode}) before {pattern!r}:\n{self.output}"
                )
            time.sleep(0.2)
        self.proc.kill()
        pytest.fail(f"no {pattern!r} within {timeout} s:\n{self.output}")

    def wait(self, timeout):
        """(rc, seconds waited); kills the job and fails the test if it outlives timeout."""
        start = time.monotonic()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.reader.join(5)
            pytest.fail(f"job still running {timeout} s later:\n{self.output}")
        self.reader.join(5)
        return rc, time.monotonic() - start


def bring_up(cluster):
    """`cluster` up (its up_seconds set), or down again and the error raised."""
    try:
        cluster.up_seconds = cluster.up()
    except BaseException:
        cluster.down()
        raise
    return cluster


def make_cluster(workers, slots=2, extra_files=(), env=None):
    return bring_up(Cluster(workers, slots, extra_files, env))


def check_network_matrix(out, title):
    """{(row host, column host): value string} of one matrix (`title`: latency, bandwidth) of
    `horovodrun --check-network`'s report `out`."""
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(title))
    cols = lines[i + 1].split()
    cells = {}
    for line in lines[i + 2 : i + 2 + len(cols)]:
        row, *values = line.split()
        cells.update({(row, c): v for c, v in zip(cols, values)})
    return cells
