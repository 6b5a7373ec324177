"""The image chains of tests/images: which layers each flavour builds, their tags, and the
containers the checks start (labelled, so `make clean/images` finds any leftovers)."""
import os

import docker

from tests.support.paths import pins

CHAINS = {"cpu": ["base", "mpi", "tensorflow", "horovod"],
          "gpu": ["base", "cuda", "mpi", "tensorflow", "horovod"]}
LATEST = {"cpu": "horovod:latest", "gpu": "horovod:latest-gpu"}  # the Makefile's floating tags
TF_PACKAGE = {"cpu": "tensorflow-cpu", "gpu": "tensorflow"}     # the TensorFlow wheel installed
TEST_LABEL = {"io.horovod.test": "1"}  # `make clean/images` removes leftovers by this label

PINS = pins()
FLAVOUR = os.environ.get("FLAVOUR", "cpu")
CHAIN = CHAINS[FLAVOUR]
IMAGE_TAG = os.environ.get("IMAGE_TAG", f"{PINS['HOROVOD_VERSION']}-{FLAVOUR}")


def image_ref(name):
    return f"horovod:{IMAGE_TAG}" if name == "horovod" else f"horovod/{name}:{IMAGE_TAG}"


class Containers:
    """Starts containers for a test session or a single test and removes them afterwards."""

    def __init__(self, client):
        self.client, self.started = client, []

    def start(self, ref, command=("sleep", "infinity"), **kwargs):
        labels = dict(TEST_LABEL, **kwargs.pop("labels", {}))
        c = self.client.containers.run(ref, list(command), detach=True, labels=labels, **kwargs)
        self.started.append(c)
        return c

    def remove_all(self):
        for c in reversed(self.started):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
        self.started.clear()


def run_ok(host, command):
    """The command's stdout (stripped), failing the test with its output unless it exits 0."""
    result = host.run(command)
    assert result.rc == 0, f"{command!r} exited {result.rc}\n{result.stdout}\n{result.stderr}"
    return result.stdout.strip()
