"""Runs what the chart renders, in Docker: not a Kubernetes run (docs/kubernetes.md).

The chart is rendered for a release with 2 workers; each pod it would make is translated into a
container (tests/support/podrun.py, which refuses any field it does not translate) on a Docker
network where each worker answers to its StatefulSet names (<release>-worker-<n>.<service> and
the namespace's full name) and the headless Service's name resolves to all workers. Then, in the
order Helm and the controllers would run them:

1. the pre-install hook makes the key pair through a stand-in API server (tests/k8s/apiserver.py:
   Secrets and ConfigMaps over HTTPS with a bearer token) from the pod's service account files;
2. the workers start (sshd from the rendered args) and pass their translated readiness probe;
3. the launcher Job's pod finds them by the Service's DNS name, writes the hostfile and trains
   (exit 0, every rank's accuracy and identical weights);
4. the `helm test` pod runs horovodrun --check-network over them (exit 0, a verdict);
5. the post-delete hook removes the Secret and the ConfigMap.

Needs horovod:<IMAGE_TAG> (make test/k8s builds it)."""

import json
import re
import subprocess
import time
import uuid

import docker
import pytest

from tests.support import k8s, podrun
from tests.support.compose import TAG, TIMINGS
from tests.support.images import TEST_LABEL
from tests.support.paths import ROOT

IMAGE = f"horovod:{TAG}"
VALUES = {
    "image": {"repository": "horovod", "tag": TAG, "pullPolicy": "Never"},
    "workers": 2,
    "slotsPerWorker": 1,
    "shm": {"sizeLimit": "512Mi"},
    "discoveryTimeoutSeconds": 60,
    "command": [
        "horovodrun",
        "python",
        "/opt/horovod/examples/tensorflow2_keras_digits.py",
        "--epochs",
        "2",
    ],
}


@pytest.fixture(scope="module")
def client():
    c = docker.from_env()
    try:
        c.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{IMAGE} is missing: `make test/k8s` builds it (make build/horovod)")
    return c


@pytest.fixture(scope="module")
def release(client, tmp_path_factory):
    """The rendered release, its network, its stand-in API server; all removed at the end."""
    work = tmp_path_factory.mktemp("release")
    name = f"hvk{uuid.uuid4().hex[:6]}"
    rendered = k8s.render(VALUES, name=name)
    net = client.networks.create(f"{name}-net", driver="bridge", labels=TEST_LABEL)
    token = uuid.uuid4().hex
    tls = work / "tls"
    tls.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + ["-nodes", "-days", "1", "-subj", "/CN=kubernetes"]
        + ["-addext", f"subjectAltName=DNS:{podrun.API_HOST}"]
        + ["-keyout", str(tls / "key.pem"), "-out", str(tls / "ca.crt")],
        check=True,
        capture_output=True,
    )
    store = work / "store"
    store.mkdir()
    containers = []
    # The API server under its in-cluster name (the pods reach it as cluster DNS would say).
    api = client.containers.create(
        IMAGE,
        ["/tls/ca.crt", "/tls/key.pem", token, "/store"],
        entrypoint=["python", "/stand-in/apiserver.py"],
        name=f"{name}-apiserver",
        labels=TEST_LABEL,
        network=net.name,
        networking_config={net.name: client.api.create_endpoint_config(aliases=[podrun.API_HOST])},
        volumes={
            str(ROOT / "tests" / "k8s"): {"bind": "/stand-in", "mode": "ro"},
            str(tls): {"bind": "/tls", "mode": "ro"},
            str(store): {"bind": "/store", "mode": "rw"},
        },
    )
    containers.append(api)
    api.start()
    # Python in a fresh container can take seconds to listen on a loaded machine; a pod started
    # before then would find the port closed (a real cluster's API server is up before any pod).
    podrun.wait_log(api, "apiserver: listening on", 60, "listening (the stand-in API server)")
    r = dict(
        name=name,
        rendered=rendered,
        net=net,
        work=work,
        store=store,
        api=(token, str(tls / "ca.crt"), k8s.NAMESPACE),
        containers=containers,
    )
    yield r
    for c in reversed(containers):
        try:
            c.remove(force=True)
        except docker.errors.NotFound:
            pass
    net.remove()


def _stored(release):
    """{(kind, name): data} of what the stand-in API server holds."""
    out = {}
    root = release["store"] / k8s.NAMESPACE
    for plural, kind in (("secrets", "Secret"), ("configmaps", "ConfigMap")):
        for f in sorted((root / plural).glob("*.json")) if (root / plural).exists() else []:
            obj = json.loads(f.read_text())
            out[(kind, obj["metadata"]["name"])] = obj["data"]
    return out


def _run_pod(client, release, obj, pod_name, timeout, aliases=()):
    spec = k8s.pod_spec(obj)
    t = podrun.Translated(spec, pod_name, str(release["work"]), _stored(release), release["api"])
    c = podrun.start(client, t, release["net"].name, aliases)
    release["containers"].append(c)
    return t, c


def _hook_job(release, hook):
    jobs = [
        o for o in k8s.objects(release["rendered"]) if o["kind"] == "Job" and k8s.is_hook(o, hook)
    ]
    assert len(jobs) == 1, hook
    return jobs[0]


def test_1_install_hook_makes_the_key_pair(client, release):
    job = _hook_job(release, "pre-install")
    _, c = _run_pod(client, release, job, f"{job['metadata']['name']}-x1", 60)
    rc, log = podrun.wait_exit(c, 60)
    assert rc == 0, log
    stored = _stored(release)
    secret = ("Secret", f"{release['name']}-ssh")
    cm = ("ConfigMap", f"{release['name']}-ssh-authorized-keys")
    assert set(stored) == {secret, cm}, log
    assert stored[cm]["authorized_keys"].startswith("ssh-ed25519 ")
    assert set(stored[secret]) == {"id_ed25519", "id_ed25519.pub"}
    # Re-running it (helm upgrade's pre-upgrade) keeps the pair.
    before = stored[secret]
    _, c2 = _run_pod(client, release, job, f"{job['metadata']['name']}-x2", 60)
    rc, log = podrun.wait_exit(c2, 60)
    assert rc == 0 and "exists: kept" in log, log
    assert _stored(release)[secret] == before


def test_2_workers_start_and_become_ready(client, release):
    sts = k8s.find(release["rendered"], "StatefulSet", "worker")
    svc = sts["spec"]["serviceName"]
    fq = f"{svc}.{k8s.NAMESPACE}.svc.cluster.local"
    start = time.monotonic()
    workers = []
    for i in range(sts["spec"]["replicas"]):
        pod = f"{sts['metadata']['name']}-{i}"
        # The pod's own names, and the Service's (a headless Service resolves to every pod).
        t, c = _run_pod(client, release, sts, pod, 60, [f"{pod}.{svc}", f"{pod}.{fq}", svc, fq])
        workers.append((t, c))
    for _, c in workers:
        podrun.wait_ready(c, 60)
    TIMINGS.append(("k8s render-run: 2 workers ready", time.monotonic() - start))
    # Only the public half reached the workers.
    for t, c in workers:
        mounts = [m["bind"] for m in t.volumes.values()]
        assert mounts == ["/etc/horovod/ssh"]
        out = c.exec_run(["ls", "/etc/horovod/ssh"]).output.decode().split()
        assert out == ["authorized_keys"], out
    release["workers"] = [c for _, c in workers]


def test_3_launcher_finds_the_workers_and_trains(client, release):
    assert release.get("workers"), "the workers did not start"
    job = k8s.find(release["rendered"], "Job", "launcher")
    start = time.monotonic()
    _, c = _run_pod(client, release, job, f"{job['metadata']['name']}-x1", 600)
    rc, log = podrun.wait_exit(c, 600)
    TIMINGS.append(("k8s render-run: launcher (discovery + 2 epochs)", time.monotonic() - start))
    assert rc == 0, log
    names = [f"{release['name']}-worker-{i}" for i in range(2)]
    assert re.search(r"cluster: 2 worker\(s\) in [0-9.]+ s: " + re.escape(names[0]), log), log
    rows = re.findall(
        r"^rank (\d+) on (\S+): test accuracy ([0-9.]+), .* weights (\w+)$", log, re.M
    )
    assert sorted(h for _, h, _, _ in rows) == names, log
    assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{log}"
    assert float(rows[0][2]) > 0.5, log
    assert "[horovod summary] 2 ranks on 2 hosts" in log, log


def test_4_helm_test_checks_the_network(client, release):
    assert release.get("workers"), "the workers did not start"
    pod = k8s.find(release["rendered"], "Pod", "test")
    _, c = _run_pod(client, release, pod, pod["metadata"]["name"], 300)
    rc, log = podrun.wait_exit(c, 300)
    assert rc == 0, log
    assert re.search(r"^verdict: ", log, re.M), log


def test_5_uninstall_hook_removes_the_keys(client, release):
    job = _hook_job(release, "post-delete")
    _, c = _run_pod(client, release, job, job["metadata"]["name"], 60)
    rc, log = podrun.wait_exit(c, 60)
    assert rc == 0, log
    assert _stored(release) == {}
