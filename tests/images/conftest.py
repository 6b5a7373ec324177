"""Image tests: pytest + testinfra over docker://, containers managed with the Docker SDK.

Every check is marked with the layer that introduced it (`@pytest.mark.layer("mpi")`) and runs
on that image and on every image built FROM it, so a child re-runs all its ancestors' checks. A
check shared by sibling layers names them all (`@pytest.mark.layer("horovod", "horovod-torch")`).
The graph of layers comes from images/layers, the file the Makefile builds from.
`--image NAME` picks one image (`make test/NAME`) with every ancestor's check; `--image all`
every image of the chain, where an ancestor's checks run on the images users run (horovod,
horovod-torch and the leaves: `users_images`) only, not again on each layer between: each check
runs on its own layer and on the first image users run at or below it, over all the layers in
between (a layer that broke an ancestor's check fails it there), and the chain's image tests take
a third less time (docs/benchmarks.md). A leaf on an image users run (spark, ray on horovod) gets
its own checks only: its parent's ran on the parent.
$FLAVOUR (cpu, gpu) picks the chain: checks of a layer outside it (cuda on cpu) are deselected,
checks marked `@pytest.mark.flavour("gpu")` are skipped on the other flavours.
"""

import uuid

import docker
import pytest
import testinfra

from tests.support import images
from tests.support.images import (
    CHAIN,
    FLAVOUR,
    GRAPH,
    IMAGE_TAG,
    LATEST,
    LATEST_TORCH,
    PARENTS,
    PINS,
    TAG_SUFFIX,
    TEST_LABEL,
    TF_PACKAGE,
    Containers,
    ancestors,
    image_ref,
)


def pytest_addoption(parser):
    parser.addoption(
        "--image",
        default="all",
        choices=CHAIN + ["all"],
        help="image (layer) to test with its ancestors' checks, or all",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "layer(*names): check added by layer(s) NAMES; runs on them and their descendants",
    )
    config.addinivalue_line(
        "markers", "flavour(name): check only for the NAME flavour's images (skipped on the others)"
    )


def pytest_report_header(config):
    edges = ", ".join(f"{p} -> {layer}" for layer, p in PARENTS.items())
    return f"image graph (FLAVOUR={FLAVOUR}, tag {IMAGE_TAG}): {edges}"


def pytest_generate_tests(metafunc):
    if "image" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--image")
        metafunc.parametrize("image", CHAIN if chosen == "all" else [chosen], scope="session")


def pytest_collection_modifyitems(config, items):
    """Keep a check only for images at or below the layer that introduced it (none if that
    layer is not in this flavour's chain): with `--image all`, for that layer and the last
    images only; skip flavour-specific checks of other flavours."""
    every = config.getoption("--image") == "all"
    users = users_images()
    keep, drop = [], []
    for item in items:
        flavour = item.get_closest_marker("flavour")
        if flavour and FLAVOUR not in flavour.args:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{'/'.join(flavour.args)} flavour only (FLAVOUR={FLAVOUR})"
                )
            )
        cs = getattr(item, "callspec", None)
        if cs is None or "image" not in cs.params:
            keep.append(item)
            continue
        marker = item.get_closest_marker("layer")
        assert marker, f"{item.nodeid}: mark the check with @pytest.mark.layer(...)"
        for layer in marker.args:
            assert any(layer in g for g in GRAPH.values()), f"{item.nodeid}: unknown layer {layer}"
        image = cs.params["image"]
        chain = checked_layers(image, users) if every else ancestors(PARENTS, image)
        applies = any(layer in chain for layer in marker.args)
        (keep if applies else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def users_images():
    """The images users run: horovod:<tag> and its siblings horovod:<tag>-<suffix> (horovod,
    horovod-torch, spark, ray) and every leaf of the graph."""
    leaves = {layer for layer in CHAIN if layer not in PARENTS.values()}
    return leaves | {layer for layer in CHAIN if image_ref(layer).startswith("horovod:")}


def checked_layers(image, users):
    """With `--image all`: the layers whose checks run on `image`: its own; on an image users
    run also its ancestors' up to the next image users run above it (which ran them)."""
    if image not in users:
        return [image]
    chain = [image]
    for layer in ancestors(PARENTS, image)[1:]:
        if layer in users:
            break
        chain.append(layer)
    return chain


@pytest.fixture(scope="session")
def client():
    return docker.from_env(timeout=600)


@pytest.fixture(scope="session")
def pins():
    return dict(PINS)


@pytest.fixture(scope="session")
def nvidia_wheels():
    """{wheel name: version} of the cuda layer: NCCL_VERSION and every NVIDIA_<NAME>_VERSION
    (nvidia-<name>-cu<CUDA major>), as scripts/stage.sh and images/cuda/Dockerfile read them."""
    cu = "cu" + PINS["CUDA_VERSION"].split(".")[0]
    wheels = {f"nvidia-nccl-{cu}": PINS["NCCL_VERSION"]}
    for key, value in PINS.items():
        if key.startswith("NVIDIA_") and key.endswith("_VERSION"):
            name = key[len("NVIDIA_") : -len("_VERSION")].lower().replace("_", "-")
            wheels[f"nvidia-{name}-{cu}"] = value
    return wheels


@pytest.fixture(scope="session")
def flavour():
    return FLAVOUR


@pytest.fixture(scope="session")
def tf_package():
    return TF_PACKAGE[FLAVOUR]


@pytest.fixture(scope="session")
def framework(image):
    """The image's framework: torch on the torch branch of the graph, else tensorflow."""
    return "torch" if "torch" in ancestors(PARENTS, image) else "tensorflow"


@pytest.fixture(scope="session")
def torch_pins(pins, flavour):
    """(torch, torchvision) versions of the flavour's torch layer (versions.env)."""
    cuda12 = "_CUDA12" if flavour == "gpu" else ""
    return pins[f"TORCH{cuda12}_VERSION"], pins[f"TORCHVISION{cuda12}_VERSION"]


@pytest.fixture(scope="session")
def latest_ref(image, framework):
    """The floating tag of an image users run: horovod:latest(-torch)(-gpu), and the CPU
    leaves' horovod:latest-<suffix> (the Makefile's EXTRA_TAGS: spark, ray)."""
    if image in TAG_SUFFIX and image != "horovod-torch":
        return f"horovod:latest{TAG_SUFFIX[image]}"
    return (LATEST_TORCH if framework == "torch" else LATEST)[FLAVOUR]


@pytest.fixture(scope="session")
def ref(image):
    return image_ref(image)


@pytest.fixture(scope="session")
def inspect(client, ref):
    """The image's config: {'Env': {...}, 'Labels': {...}, 'Entrypoint': [...], ...}."""
    try:
        config = dict(client.images.get(ref).attrs["Config"])
    except docker.errors.ImageNotFound:
        pytest.fail(f"image {ref} missing: run `make build/<image>` first")
    config["Env"] = dict(e.split("=", 1) for e in config.get("Env") or [])
    config["Labels"] = config.get("Labels") or {}
    return config


@pytest.fixture(scope="session")
def session_containers(client):
    containers = Containers(client)
    yield containers
    containers.remove_all()


@pytest.fixture
def containers(client):
    """Per-test containers (for checks that change or inspect a pristine filesystem)."""
    containers = Containers(client)
    yield containers
    containers.remove_all()


@pytest.fixture(scope="session")
def container(session_containers, ref):
    """One long-lived container per image, shared by the read-only checks."""
    return session_containers.start(ref)


@pytest.fixture(scope="session")
def host(container):
    return testinfra.get_host(f"docker://{container.id}")


@pytest.fixture(scope="session")
def user_host(container):
    return testinfra.get_host(f"docker://mpiuser@{container.id}")


@pytest.fixture
def network(client):
    net = client.networks.create(f"horovod-test-{uuid.uuid4().hex[:8]}", labels=TEST_LABEL)
    yield net
    net.reload()
    for c in net.containers:  # normally gone already (fixture order), but never leak a network
        c.remove(force=True)
    net.remove()


@pytest.fixture(scope="session")
def run_ok():
    """run_ok(host, command) -> stdout, failing the test with the output unless it exits 0."""
    return images.run_ok
