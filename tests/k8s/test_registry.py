"""`make push` against a real registry: Debian's docker-registry (CNCF Distribution) serving on
127.0.0.1 (scripts/install-prereqs.sh installs it). Every layer goes up with its version and
latest tags; the registry's tags are removed locally and pulled back (same image IDs); an image
built FROM <registry>/horovod:<tag> is pushed, deleted here and pulled back, so its own layer
really travels; the chart renders with that registry's image."""

import json
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid

import docker
import pytest

from tests.support import k8s
from tests.support.compose import TAG, TIMINGS
from tests.support.images import CHAIN, FLAVOUR, LATEST_TORCH, TAG_SUFFIX, TEST_LABEL, image_ref
from tests.support.paths import EXAMPLES, ROOT, pins

LATEST = {"cpu": "latest", "gpu": "latest-gpu"}[FLAVOUR]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    exe = shutil.which("docker-registry")
    if not exe:
        pytest.fail("docker-registry is missing: scripts/install-prereqs.sh installs it (apt)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    assert pins()["DOCKER_REGISTRY_DEB_VERSION"].split("+")[0] in version, version
    work = tmp_path_factory.mktemp("registry")
    port = _free_port()
    (work / "config.yml").write_text(
        "version: 0.1\n"
        f"storage:\n  filesystem:\n    rootdirectory: {work / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        "log:\n  level: warn\n"
    )
    log = open(work / "registry.log", "w")
    proc = subprocess.Popen([exe, "serve", str(work / "config.yml")], stdout=log, stderr=log)
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            _get(f"http://{host}/v2/")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"registry did not start:\n{(work / 'registry.log').read_text()}")
            time.sleep(0.2)
    yield host
    proc.terminate()
    proc.wait(10)
    client = docker.from_env()
    for img in client.images.list():
        for t in img.tags:
            if t.startswith(host + "/"):
                client.images.remove(t, force=True)


def test_make_push_puts_every_layer_with_both_tags(registry):
    start = time.monotonic()
    p = subprocess.run(
        ["make", "--no-print-directory", "push", f"REGISTRY={registry}", f"IMAGE_TAG={TAG}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    TIMINGS.append(
        (f"make push ({len(CHAIN)} layers) to a local registry", time.monotonic() - start)
    )
    assert p.returncode == 0, p.stdout + p.stderr
    repos = _get(f"http://{registry}/v2/_catalog")["repositories"]
    # {repository: its tags}: each layer's versioned tag and its floating one; the images
    # users run share the horovod repository (horovod:<tag>, horovod:<tag>-torch, the CPU
    # flavour's -spark and -ray, each with its own floating tag).
    want = {}
    for layer in CHAIN:
        repo, tag = image_ref(layer).split(":")
        if layer == "horovod-torch":
            latest = LATEST_TORCH[FLAVOUR].split(":")[1]
        elif layer in TAG_SUFFIX:
            latest = "latest" + TAG_SUFFIX[layer]
        else:
            latest = LATEST
        want.setdefault(repo, set()).update({tag, latest})
    assert sorted(repos) == sorted(want)
    for repo, wanted in want.items():
        tags = _get(f"http://{registry}/v2/{repo}/tags/list")["tags"]
        assert sorted(tags) == sorted(wanted), (repo, tags)


def test_pull_back_after_removing_the_local_tags(registry):
    client = docker.from_env()
    ref = f"{registry}/horovod:{TAG}"
    local_id = client.images.get(f"horovod:{TAG}").id
    for t in (ref, f"{registry}/horovod:{LATEST}"):
        client.images.remove(t)  # the tag only: horovod:<tag> keeps the layers
    start = time.monotonic()
    pulled = client.images.pull(f"{registry}/horovod", tag=TAG)
    TIMINGS.append(
        ("pull of the registry's horovod tag (layers present)", time.monotonic() - start)
    )
    assert pulled.id == local_id  # the same image, config and layers


def test_build_from_the_registry_push_and_pull_a_derived_image(registry, tmp_path):
    client = docker.from_env()
    tag = f"{registry}/hvdtest-user:{uuid.uuid4().hex[:8]}"
    # The example with a train.py of this test's own (a comment line): another build of the
    # example beside this test (tests/cluster/test_user_image.py) would otherwise hold the very
    # same layers, and the pull below would find them present and fetch nothing.
    context = tmp_path / "user-image"
    shutil.copytree(EXAMPLES / "user-image", context)
    with open(context / "train.py", "a") as f:
        f.write(f"# {tag}\n")
    client.images.build(
        path=str(context),
        tag=tag,
        buildargs={"BASE_IMAGE": f"{registry}/horovod:{TAG}"},
        labels=TEST_LABEL,
        rm=True,
        forcerm=True,
    )
    built = client.images.get(tag)
    assert built.attrs["Config"]["Labels"]["io.horovod.version"] == pins()["HOROVOD_VERSION"]
    for line in client.images.push(tag, stream=True, decode=True):
        assert "error" not in line, line
    client.images.remove(tag)  # its own layers go with it: the pull must fetch them
    start = time.monotonic()
    repo, _, version = tag.rpartition(":")
    status = [e.get("status", "") for e in client.api.pull(repo, version, stream=True, decode=True)]
    TIMINGS.append(("pull of the derived image (its layers fetched)", time.monotonic() - start))
    assert "Pull complete" in status, status  # a layer came over the wire, not from the cache
    assert client.images.get(tag).id == built.id
    out = client.containers.run(tag, ["ls", "/app"], remove=True).decode().split()
    assert out == ["requirements.txt", "train.py"]
    client.images.remove(tag)


def test_chart_points_at_the_registry(registry):
    rendered = k8s.render({"image": {"registry": registry, "repository": "horovod", "tag": TAG}})
    images = {
        c["image"]
        for o in k8s.objects(rendered)
        if o["kind"] in ("Job", "StatefulSet", "Pod")
        for c in k8s.pod_spec(o)["containers"]
    }
    assert images == {f"{registry}/horovod:{TAG}"}
