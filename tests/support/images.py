"""The image graph of tests/images (images/layers, the file the Makefile builds from): which
layers each flavour builds and from which parent, their tags, and the containers the checks
start (labelled, so `make clean/images` finds any leftovers)."""

import os

import docker

from tests.support.paths import ROOT, pins

LATEST = {"cpu": "horovod:latest", "gpu": "horovod:latest-gpu"}  # the Makefile's floating tags
TAG_SUFFIX = {"horovod-torch": "-torch", "spark": "-spark", "ray": "-ray"}  # the Makefile's
LATEST_TORCH = {"cpu": "horovod:latest-torch", "gpu": "horovod:latest-torch-gpu"}
TF_PACKAGE = {"cpu": "tensorflow-cpu", "gpu": "tensorflow"}  # the TensorFlow wheel installed
TEST_LABEL = {"io.horovod.test": "1"}  # `make clean/images` removes leftovers by this label


def load_layers(path=ROOT / "images" / "layers"):
    """{flavour: {layer: parent}}, layers in build order ("rootfs" is the Debian root image; a
    "-" cell leaves the layer out of that flavour)."""
    rows = [
        line.split()
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    flavours = rows[0][1:]
    return {
        f: {row[0]: row[1 + i] for row in rows[1:] if row[1 + i] != "-"}
        for i, f in enumerate(flavours)
    }


def ancestors(parents, layer):
    """`layer` and every layer it is built FROM, up to the root image."""
    chain = []
    while layer in parents:
        chain.append(layer)
        layer = parents[layer]
    return chain


PINS = pins()
GRAPH = load_layers()
FLAVOUR = os.environ.get("FLAVOUR", "cpu")
PARENTS = GRAPH[FLAVOUR]
CHAIN = list(PARENTS)  # this flavour's layers in build order
IMAGE_TAG = os.environ.get("IMAGE_TAG", f"{PINS['HOROVOD_VERSION']}-{FLAVOUR}")


def image_ref(name):
    """As the Makefile's image_ref: the images users run are horovod:<tag> and
    horovod:<tag>-<suffix> (TAG_SUFFIX), the others horovod/<layer>:<tag>."""
    if name == "horovod":
        return f"horovod:{IMAGE_TAG}"
    if name in TAG_SUFFIX:
        return f"horovod:{IMAGE_TAG}{TAG_SUFFIX[name]}"
    return f"horovod/{name}:{IMAGE_TAG}"


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
