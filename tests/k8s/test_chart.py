"""charts/horovod rendered by Helm's Go code for a matrix of values, linted, and every object
checked against Kubernetes' own schemas (strict: unknown fields fail) for the oldest and newest
supported versions; then what the chart promises: discovery, readiness, keys, GPUs, hostNetwork,
and values that fail at install with a message. No cluster: docs/kubernetes.md says what that
leaves untested."""

import json
import re

import kubernetes_validate
import pytest

from tests.support import k8s
from tests.support.paths import pins

GPU = {
    "image": {"repository": "horovod", "tag": "0.1.0-gpu", "pullPolicy": "IfNotPresent"},
    "resources": {"limits": {"nvidia.com/gpu": 4, "memory": "64Gi"}},
}
MATRIX = {
    "defaults": {},
    "1worker": {"workers": 1},
    "16workers": {"workers": 16, "slotsPerWorker": 8},
    "gpu": GPU,
    # The torch image through the same knob (make images-torch; make push pushes it too).
    "torch": {"image": {"tag": f"{pins()['HOROVOD_VERSION']}-cpu-torch"}},
    "elastic": {"workers": 3, "elastic": {"enabled": True, "minWorkers": 2, "maxWorkers": 4}},
    "hostNetwork": {"hostNetwork": True, "ssh": {"port": 2345}},
    "custom": {
        "image": {"registry": "reg.example:5000", "repository": "team/trainer", "tag": "v3"},
        "imagePullSecrets": [{"name": "regcred"}],
        "command": ["horovodrun", "python", "/workspace/train.py", "--lr", "0.1"],
        "horovod": {"HOROVOD_FUSION_THRESHOLD": 33554432, "HOROVOD_LOG_LEVEL": "info"},
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
        "nodeSelector": {"pool": "train"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "horovod"}},
                        },
                    }
                ]
            }
        },
        "shm": {"sizeLimit": "8Gi"},
        "launcher": {"ttlSecondsAfterFinished": 600, "activeDeadlineSeconds": 7200},
    },
}


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def case(request):
    values = MATRIX[request.param]
    return request.param, values, k8s.render(values)


def _container(obj):
    (c,) = k8s.pod_spec(obj)["containers"]
    return c


def _env(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_lint_is_clean(case):
    name, values, _ = case
    report = k8s.helm().lint(k8s.CHART, values, strict=True, namespace=k8s.NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert not problems, f"{name}: {problems}"


@pytest.mark.parametrize("version", k8s.KUBE_VERSIONS)
def test_objects_match_kubernetes_schemas(case, version):
    name, _, rendered = case
    for obj in k8s.objects(rendered):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{name}: {obj['kind']} {obj['metadata']['name']} on {version}: {e}")


def test_objects(case):
    name, values, rendered = case
    kinds = sorted(o["kind"] for o in k8s.objects(rendered) if not k8s.is_hook(o, "test"))
    assert kinds == sorted(
        ["Service", "StatefulSet", "Job", "Job", "Job", "ServiceAccount", "Role", "RoleBinding"]
    ), name


def test_workers_and_service(case):
    _, values, rendered = case
    svc = k8s.find(rendered, "Service", "worker")
    sts = k8s.find(rendered, "StatefulSet", "worker")
    port = values.get("ssh", {}).get("port", 2222)
    assert svc["spec"]["clusterIP"] == "None"  # headless: the name resolves to every worker
    assert svc["spec"]["ports"] == [{"name": "ssh", "port": port, "targetPort": "ssh"}]
    assert sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert sts["spec"]["replicas"] == values.get("workers", 2)
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    c = _container(sts)
    assert c["args"][:5] == ["/usr/sbin/sshd", "-D", "-e", "-p", str(port)]  # foreground
    assert port != 22
    assert c["ports"] == [{"name": "ssh", "containerPort": port}]
    assert c["readinessProbe"]["tcpSocket"] == {"port": "ssh"}
    dshm = next(v for v in k8s.pod_spec(sts)["volumes"] if v["name"] == "dshm")
    size = values.get("shm", {}).get("sizeLimit", "1Gi")
    assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": size}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]


def test_launcher_job(case):
    _, values, rendered = case
    job = k8s.find(rendered, "Job", "launcher")
    svc = k8s.find(rendered, "Service", "worker")
    assert job["spec"]["backoffLimit"] == 0
    ttl = values.get("launcher", {}).get("ttlSecondsAfterFinished", 86400)
    assert job["spec"]["ttlSecondsAfterFinished"] == ttl
    spec = k8s.pod_spec(job)
    assert spec["restartPolicy"] == "Never"
    c = _container(job)
    cmd = c["command"]
    assert cmd[:5] == ["/usr/bin/tini", "--", "python", "-m", "horovod.runner.cluster"]
    assert cmd[cmd.index("--service") + 1] == svc["metadata"]["name"]
    command = values.get("command", k8s.helm().Chart.load(k8s.CHART).values["command"])
    if values.get("elastic", {}).get("enabled"):
        assert cmd[cmd.index("--expect") + 1] == str(values["elastic"]["minWorkers"])
    else:
        assert cmd[cmd.index("--expect") + 1] == str(values.get("workers", 2))
        assert c["args"] == command
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"  # says why it failed
    assert spec["dnsConfig"]["searches"] == [f"{svc['metadata']['name']}.ml.svc.cluster.local"]
    env = _env(c)
    assert env["HOROVOD_HOSTFILE"] == cmd[cmd.index("--hostfile") + 1]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"  # the launcher runs no rank
    for k, v in values.get("horovod", {}).items():
        assert env[k] == str(v)


def test_image(case):
    name, values, rendered = case
    want = {
        "custom": "reg.example:5000/team/trainer:v3",
        "gpu": "horovod:0.1.0-gpu",
        "torch": f"horovod:{pins()['HOROVOD_VERSION']}-cpu-torch",
    }.get(name, f"horovod:{pins()['HOROVOD_VERSION']}-cpu")
    for obj in k8s.objects(rendered):
        if obj["kind"] in ("Job", "StatefulSet", "Pod"):
            assert _container(obj)["image"] == want, obj["metadata"]["name"]
            assert k8s.pod_spec(obj).get("imagePullSecrets", []) == values.get(
                "imagePullSecrets", []
            )


def test_elastic_launcher_command():
    """elastic.enabled: the command gets the elastic flags, in ranks (workers x slots), and the
    compose/headless-Service discovery; rendered only (no cluster ran it)."""
    values = {"workers": 3, "elastic": {"enabled": True, "minWorkers": 2, "maxWorkers": 4}}
    c = _container(k8s.find(k8s.render(values), "Job", "launcher"))
    assert c["args"] == [
        "horovodrun",
        "--min-np",
        "4",
        "--max-np",
        "8",
        "--host-discovery-script",
        "python -m horovod.runner.cluster --discover",
        "--elastic-timeout",
        "600",
        "python",
        "/opt/horovod/examples/tensorflow2_keras_digits.py",
        "--epochs",
        "10",
    ]
    values["elastic"].update(maxWorkers=None, resetLimit=3)
    args = _container(k8s.find(k8s.render(values), "Job", "launcher"))["args"]
    assert args[args.index("--max-np") + 1] == "6" and args[args.index("--reset-limit") + 1] == "3"


def test_slots_follow_gpus():
    for values, slots in (({}, "2"), (GPU, "4"), (dict(GPU, slotsPerWorker=2), "2")):
        cmd = _container(k8s.find(k8s.render(values), "Job", "launcher"))["command"]
        assert cmd[cmd.index("--slots") + 1] == slots, values
    sts = k8s.find(k8s.render(GPU), "StatefulSet", "worker")
    assert _container(sts)["resources"]["limits"]["nvidia.com/gpu"] == 4


def test_host_network_only_on_workers():
    rendered = k8s.render(MATRIX["hostNetwork"])
    spec = k8s.pod_spec(k8s.find(rendered, "StatefulSet", "worker"))
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "hostNetwork" not in k8s.pod_spec(k8s.find(rendered, "Job", "launcher"))


def test_keys_are_made_at_install_never_in_values_or_chart():
    values_text = (k8s.CHART / "values.yaml").read_text()
    assert not re.search(r"(?i)private|BEGIN .*KEY|password|token", values_text)
    for f in k8s.CHART.rglob("*"):
        if f.is_file():
            assert "PRIVATE KEY-----" not in f.read_text(), f
    rendered = k8s.render()
    blob = json.dumps(k8s.objects(rendered))
    assert "PRIVATE KEY" not in blob and "ssh-ed25519" not in blob
    assert not [o for o in k8s.objects(rendered) if o["kind"] in ("Secret", "ConfigMap")]
    # The hook makes them, with the chart's image and a role limited to this namespace.
    make = next(
        o for o in k8s.objects(rendered) if o["kind"] == "Job" and k8s.is_hook(o, "pre-install")
    )
    assert k8s.is_hook(make, "pre-upgrade")  # an upgrade re-makes a deleted pair
    cmd = _container(make)["command"]
    assert cmd[:3] == ["python", "-m", "horovod.runner.cluster.k8s_keys"]
    secret, configmap = cmd[cmd.index("--secret") + 1], cmd[cmd.index("--configmap") + 1]
    drop = next(
        o for o in k8s.objects(rendered) if o["kind"] == "Job" and k8s.is_hook(o, "post-delete")
    )
    assert "--delete" in _container(drop)["command"]
    role = next(o for o in k8s.objects(rendered) if o["kind"] == "Role")
    assert {r["resources"][0] for r in role["rules"]} == {"secrets", "configmaps"}
    # Workers: the public half only (a ConfigMap), no Secret, no API token.
    workers = k8s.pod_spec(k8s.find(rendered, "StatefulSet", "worker"))
    assert [v for v in workers["volumes"] if "secret" in v] == []
    (keys,) = [v for v in workers["volumes"] if "configMap" in v]
    assert keys["configMap"]["name"] == configmap
    assert workers["automountServiceAccountToken"] is False
    # Launcher and test pod: the Secret, read-only, owner-only.
    for obj in (k8s.find(rendered, "Job", "launcher"), k8s.find(rendered, "Pod", "test")):
        spec = k8s.pod_spec(obj)
        (vol,) = [v for v in spec["volumes"] if "secret" in v]
        assert vol["secret"] == {"secretName": secret, "defaultMode": 0o400}
        assert spec["automountServiceAccountToken"] is False


def test_helm_test_pod_checks_the_network():
    pod = k8s.find(k8s.render(), "Pod", "test")
    assert k8s.is_hook(pod, "test")
    c = _container(pod)
    assert c["args"] == ["horovodrun", "--check-network"]
    assert c["command"][:5] == _container(k8s.find(k8s.render(), "Job", "launcher"))["command"][:5]


def test_notes_say_how_to_follow_the_launcher():
    notes = k8s.render()["horovod/templates/NOTES.txt"]
    assert "kubectl logs -n ml -f job/demo-launcher" in notes
    assert "[horovod summary]" in notes and "helm test -n ml demo --logs" in notes


def test_app_version_is_the_package_version():
    with k8s.helm().Chart.load(k8s.CHART) as chart:
        assert chart.metadata["appVersion"] == pins()["HOROVOD_VERSION"]


@pytest.mark.parametrize(
    "values, message",
    [
        ({"workers": 0}, "at '/workers': minimum: got 0, want 1"),
        ({"workers": "2"}, "at '/workers': got string, want integer"),
        ({"ssh": {"port": 22}}, "at '/ssh/port': minimum: got 22, want 1,024"),
        ({"wrkers": 3}, "additional properties 'wrkers' not allowed"),
        ({"command": "horovodrun python train.py"}, "at '/command': got string, want array"),
        ({"horovod": {"FUSION_THRESHOLD": 1}}, "FUSION_THRESHOLD"),
        ({"image": {"repository": "h", "pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"shm": {"sizeLimit": "lots"}}, "/shm/sizeLimit"),
        ({"resources": {"limit": {"cpu": 1}}}, "additional properties 'limit' not allowed"),
        ({"elastic": {"enabled": True, "minWorkers": 0}}, "/elastic/minWorkers"),
    ],
)
def test_bad_values_fail_with_a_message(values, message):
    with pytest.raises(k8s.helm().HelmValuesError) as e:
        k8s.render(values)
    assert message in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"command": ["python", "t.py"]}, "needs a command that starts with horovodrun"),
        ({"workers": 2, "elastic": {"minWorkers": 3}}, "maxWorkers is below elastic.minWorkers"),
    ],
)
def test_bad_elastic_values_fail_with_a_message(values, message):
    values = dict(values, elastic=dict(values.get("elastic", {}), enabled=True))
    with pytest.raises(Exception) as e:  # noqa: PT011  (Helm's template error type)
        k8s.render(values)
    assert message in str(e.value), str(e.value)
