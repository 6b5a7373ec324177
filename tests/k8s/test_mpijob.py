"""deploy/mpijob.yaml: the MPI Operator's MPIJob fields (tests/k8s/fixtures, written from the
operator's CRD; unknown fields refused) and each pod template against Kubernetes' own schema;
the same image and the same conventions as the chart. Not run under a real operator."""

import json

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import k8s
from tests.support.paths import ROOT, pins

MPIJOB = ROOT / "deploy" / "mpijob.yaml"
SCHEMA = ROOT / "tests" / "k8s" / "fixtures" / "mpijob-v2beta1.schema.json"


@pytest.fixture(scope="module")
def job():
    (doc,) = [d for d in yaml.safe_load_all(MPIJOB.read_text()) if d]
    return doc


def test_matches_the_operator_crd(job):
    jsonschema.validate(job, json.loads(SCHEMA.read_text()))


def test_schema_refuses_what_the_operator_does_not_know(job):
    bad = dict(job, spec=dict(job["spec"], slotsPerWorkers=2))
    with pytest.raises(jsonschema.ValidationError, match="slotsPerWorkers"):
        jsonschema.validate(bad, json.loads(SCHEMA.read_text()))


@pytest.mark.parametrize("version", k8s.KUBE_VERSIONS)
@pytest.mark.parametrize("role", ["Launcher", "Worker"])
def test_pod_templates_match_kubernetes_schema(job, role, version):
    template = job["spec"]["mpiReplicaSpecs"][role]["template"]
    obj = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": f"mpijob-{role.lower()}"},
        "template": template,
    }
    kubernetes_validate.validate(obj, version, strict=True)


def test_uses_this_repository_image_and_conventions(job):
    specs = job["spec"]["mpiReplicaSpecs"]
    image = f"horovod:{pins()['HOROVOD_VERSION']}-cpu"
    (launcher,) = specs["Launcher"]["template"]["spec"]["containers"]
    (worker,) = specs["Worker"]["template"]["spec"]["containers"]
    assert launcher["image"] == worker["image"] == image
    assert launcher["command"][0] == "horovodrun"
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["HOROVOD_HOSTFILE"] == "/etc/mpi/hostfile"  # the operator's hostfile
    assert env["HOROVOD_SSH_IDENTITY_FILE"].startswith(job["spec"]["sshAuthMountPath"])
    assert worker["args"][:3] == ["/usr/sbin/sshd", "-D", "-e"]
    assert worker["ports"] == [{"name": "ssh", "containerPort": 2222}]  # the image's port
    assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert job["spec"]["runPolicy"]["backoffLimit"] == 0
