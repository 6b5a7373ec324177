"""deploy/trainer-runtime.yaml and deploy/trainjob.yaml: Horovod over torchrun under Kubeflow
Trainer v2, checked offline. (a) The runtime's JobSet pod template, alone and as the Trainer
would fill it from the TrainJob, against Kubernetes' own schemas (kubernetes-validate, strict);
(b) both objects against the openAPIV3Schema of Kubeflow Trainer v2.3.0's CRDs (vendored as-is
in tests/k8s/fixtures/kubeflow-trainer, see its README; unknown fields refused), plus the few
CEL rules and webhook checks of that release that touch them; (c) the invariants: our image, no
key inline, the variables torchrun and the engine need, ranks per node agreeing with the
resources. Not run under a real Trainer controller or on a cluster."""

import copy
import hashlib
import re

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import k8s
from tests.support.paths import EXAMPLES, ROOT, pins

RUNTIME = ROOT / "deploy" / "trainer-runtime.yaml"
TRAINJOB = ROOT / "deploy" / "trainjob.yaml"
CRDS = ROOT / "tests" / "k8s" / "fixtures" / "kubeflow-trainer"
# kubeflow/trainer v2.3.0 (658725bdae5c7e3a0854d93ac6ff492e109a22ab), manifests/base/crds/.
CRD_SHA256 = {
    "trainer.kubeflow.org_clustertrainingruntimes.yaml": (
        "ec84dc3388fcdbe8c61d3c247a773d14458dd9438e995bea8e50d2a18080eef9"
    ),
    "trainer.kubeflow.org_trainjobs.yaml": (
        "a742cafc5b5582640c7e0b7467c024fc237256fbca5ba0a9f0531dfb66d64416"
    ),
}
API_VERSION = "trainer.kubeflow.org/v1alpha1"

# What Trainer v2.3.0's torch plugin (pkg/runtime/framework/plugins/torch/torch.go) and JobSet
# builder do to the container named "node" of the Job labelled as the trainer ancestor.
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE = "node"
PET_MASTER_PORT = 29500  # constants.ContainerTrainerPort
PET_RESERVED = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR"}
PET_RESERVED |= {"PET_MASTER_PORT"}
SECRETISH = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL", re.I)


def load(path):
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return doc


@pytest.fixture(scope="module")
def runtime():
    return load(RUNTIME)


@pytest.fixture(scope="module")
def trainjob():
    return load(TRAINJOB)


def strict(schema):
    """The CRD schema with unknown fields refused: the API server prunes them silently, and
    `kubectl apply` (strict field validation, its default) refuses them. Nothing in these CRDs
    sets x-kubernetes-preserve-unknown-fields; a node that did would be left open."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_validator(name, kind):
    crd = yaml.load((CRDS / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == API_VERSION.split("/")[1]]
    assert version["served"] and version["storage"]
    return jsonschema.Draft7Validator(strict(version["schema"]["openAPIV3Schema"]))


@pytest.fixture(scope="module")
def runtime_schema():
    return crd_validator(
        "trainer.kubeflow.org_clustertrainingruntimes.yaml", "ClusterTrainingRuntime"
    )


@pytest.fixture(scope="module")
def trainjob_schema():
    return crd_validator("trainer.kubeflow.org_trainjobs.yaml", "TrainJob")


def node_job(runtime):
    """The replicated Job the Trainer fills from the TrainJob's trainer."""
    (rjob,) = [
        r
        for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        if r["template"].get("metadata", {}).get("labels", {}).get(ANCESTOR_LABEL) == "trainer"
    ]
    return rjob


def node_container(pod_spec):
    (container,) = [c for c in pod_spec["containers"] if c["name"] == NODE]
    return container


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def upsert(items, new, same):
    for n in new:
        i = next((i for i, old in enumerate(items) if same(old, n)), None)
        if i is None:
            items.append(n)
        else:
            items[i] = n


def num_gpus(resources):
    """runtime.GetNumGPUPerNode: a resource whose name contains "gpu", requests before limits."""
    for part in ("requests", "limits"):
        for name, quantity in resources.get(part, {}).items():
            if "gpu" in name.lower() and int(quantity) > 0:
                return int(quantity)
    return 0


def cpus(quantity):
    """resource.Quantity.Value() of a CPU quantity: rounded up to whole cores."""
    q = str(quantity)
    return -(-int(q[:-1]) // 1000) if q.endswith("m") else -(-int(float(q)) // 1)


def nproc_per_node(runtime, trainjob):
    """PET_NPROC_PER_NODE as v2.3.0's torch plugin sets it: the TrainJob's numProcPerNode, else
    "auto": the GPU count of the resources, or without GPUs their CPU count (requests, else
    limits; at least 1). The resources are the TrainJob's resourcesPerNode if set, else the
    runtime container's."""
    trainer = trainjob.get("spec", {}).get("trainer", {})
    if "numProcPerNode" in trainer:
        return str(trainer["numProcPerNode"])
    res = trainer.get("resourcesPerNode")
    if res is None:
        res = node_container(node_job(runtime)["template"]["spec"]["template"]["spec"])
        res = res.get("resources", {})
    if num_gpus(res):
        return "auto"  # torchrun: one process per visible GPU
    cpu = res.get("requests", {}).get("cpu") or res.get("limits", {}).get("cpu")
    return str(max(1, cpus(cpu) if cpu else 0))


def effective_pod_template(runtime, trainjob):
    """The node Job's pod template after the Trainer applied the TrainJob (v2.3.0): image,
    command and args replaced, env upserted by name, resources merged per key, the PET_* env
    and port 29500 added. An approximation for offline checks, not the controller's code."""
    template = copy.deepcopy(node_job(runtime)["template"]["spec"]["template"])
    container = node_container(template["spec"])
    trainer = trainjob["spec"].get("trainer", {})
    for field in ("image", "command", "args"):
        if field in trainer:
            container[field] = trainer[field]
    env = container.setdefault("env", [])
    upsert(env, trainer.get("env", []), lambda a, b: a["name"] == b["name"])
    if "resourcesPerNode" in trainer:
        res = container.setdefault("resources", {})
        for part, values in trainer["resourcesPerNode"].items():
            res[part] = {**res.get(part, {}), **values}
    name = trainjob["metadata"]["name"]
    num_nodes = trainer.get("numNodes", runtime["spec"]["mlPolicy"].get("numNodes", 1))
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    pet = [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": nproc_per_node(runtime, trainjob)},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": index}}},
        {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE}-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": str(PET_MASTER_PORT)},
    ]
    upsert(env, pet, lambda a, b: a["name"] == b["name"])
    ports = container.setdefault("ports", [])
    upsert(
        ports,
        [{"containerPort": PET_MASTER_PORT}],
        lambda a, b: a["containerPort"] == b["containerPort"] or a.get("name") == b.get("name"),
    )
    return template


# --- the vendored CRDs --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CRD_SHA256))
def test_vendored_crds_are_the_pinned_release(name):
    digest = hashlib.sha256((CRDS / name).read_bytes()).hexdigest()
    assert digest == CRD_SHA256[name], f"{name} differs from kubeflow/trainer v2.3.0"
    assert CRD_SHA256[name] in (CRDS / "README.md").read_text()


# --- (b) the Trainer objects against the CRDs ---------------------------------------------------


def test_runtime_matches_the_crd(runtime, runtime_schema):
    assert runtime["apiVersion"] == API_VERSION and runtime["kind"] == "ClusterTrainingRuntime"
    runtime_schema.validate(runtime)


def test_trainjob_matches_the_crd(trainjob, trainjob_schema):
    assert trainjob["apiVersion"] == API_VERSION and trainjob["kind"] == "TrainJob"
    trainjob_schema.validate(trainjob)


def test_schemas_refuse_what_the_trainer_does_not_know(
    runtime, trainjob, runtime_schema, trainjob_schema
):
    # numProcPerNode under mlPolicy.torch was Trainer v2.0/v2.1's; since v2.2 it is the TrainJob's.
    old = copy.deepcopy(runtime)
    old["spec"]["mlPolicy"]["torch"] = {"numProcPerNode": 2}
    with pytest.raises(jsonschema.ValidationError, match="numProcPerNode"):
        runtime_schema.validate(old)
    typo = copy.deepcopy(trainjob)
    typo["spec"]["trainer"]["numProcsPerNode"] = 2
    with pytest.raises(jsonschema.ValidationError, match="numProcsPerNode"):
        trainjob_schema.validate(typo)
    auto = copy.deepcopy(trainjob)
    auto["spec"]["trainer"]["numProcPerNode"] = "auto"  # an int32 since v2.2
    with pytest.raises(jsonschema.ValidationError):
        trainjob_schema.validate(auto)


def test_cel_rules_and_webhook_checks(runtime, trainjob):
    """What jsonschema does not evaluate: the CRDs' CEL rules (x-kubernetes-validations) and
    the torch plugin's admission checks that apply to these objects."""
    name = trainjob["metadata"]["name"]
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63
    policies = {"torch", "mpi", "jax", "xgboost", "flux"} & set(runtime["spec"]["mlPolicy"])
    assert policies == {"torch"}, "only one ML policy may be set"
    reserved = PET_RESERVED & {e["name"] for e in trainjob["spec"]["trainer"].get("env", [])}
    assert not reserved, f"the torch plugin refuses a TrainJob setting {reserved}"
    # The JobSet names pods <trainjob>-node-<i>-<j>; PET_MASTER_ADDR is a DNS name built from it.
    assert len(f"{name}-{NODE}-0-0") <= 63


# --- (a) the pod templates against Kubernetes' own schemas --------------------------------------


@pytest.mark.parametrize("version", k8s.KUBE_VERSIONS)
def test_runtime_job_template_matches_kubernetes_schema(runtime, version):
    rjob = node_job(runtime)
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "horovod-node", **rjob["template"].get("metadata", {})},
        "spec": rjob["template"]["spec"],
    }
    kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", k8s.KUBE_VERSIONS)
@pytest.mark.parametrize("source", ["runtime", "filled from the TrainJob"])
def test_pod_template_matches_kubernetes_schema(runtime, trainjob, source, version):
    if source == "runtime":
        template = node_job(runtime)["template"]["spec"]["template"]
    else:
        template = effective_pod_template(runtime, trainjob)
    obj = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "horovod-node"},
        "template": template,
    }
    kubernetes_validate.validate(obj, version, strict=True)


# --- (c) invariants -----------------------------------------------------------------------------


def test_trainjob_runs_this_runtime(runtime, trainjob):
    assert runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert trainjob["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": runtime["metadata"]["name"],
    }
    # The Trainer applies the TrainJob only to a container named node of the labelled Job.
    rjob = node_job(runtime)
    assert rjob["name"] == NODE
    node_container(rjob["template"]["spec"]["template"]["spec"])


def test_uses_this_repository_torch_image(runtime, trainjob):
    image = f"horovod:{pins()['HOROVOD_VERSION']}-cpu-torch"  # make images-torch
    pod = node_job(runtime)["template"]["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == [image]
    assert not pod.get("initContainers")
    assert trainjob["spec"]["trainer"]["image"] == image


def test_trainjob_runs_an_example_through_torchrun(trainjob):
    command = trainjob["spec"]["trainer"]["command"]
    assert command[0] == "torchrun"
    # torchrun takes --nnodes, --nproc-per-node, --node-rank, --master-addr/port from PET_*.
    assert not [a for a in command if a.startswith(("--nnodes", "--nproc", "--node", "--master"))]
    (script,) = [a for a in command if a.endswith(".py")]
    prefix = "/opt/horovod/examples/"  # images/horovod/Dockerfile
    assert script.startswith(prefix) and (EXAMPLES / script[len(prefix) :]).is_file()
    assert "hvd.init()" in (EXAMPLES / script[len(prefix) :]).read_text()


def test_no_secret_value_in_git(runtime, trainjob):
    runtime_env = env_of(node_container(node_job(runtime)["template"]["spec"]["template"]["spec"]))
    for env in (runtime_env, env_of(trainjob["spec"]["trainer"])):
        key = env["HOROVOD_SECRET_KEY"]
        assert "value" not in key and set(key["valueFrom"]) == {"secretKeyRef"}
        assert not key["valueFrom"]["secretKeyRef"].get("optional", False)  # no key: no start
        for name, e in env.items():
            assert not (SECRETISH.search(name) and "value" in e), f"{name} has an inline value"
    for path in (RUNTIME, TRAINJOB):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert not [d for d in docs if d.get("kind") == "Secret"], f"{path.name} holds a Secret"
        assert not re.search(r"\b[0-9a-f]{32,}\b", path.read_text()), f"a key in {path.name}?"


def test_secret_is_per_job(runtime, trainjob):
    job_ref = env_of(trainjob["spec"]["trainer"])["HOROVOD_SECRET_KEY"]["valueFrom"]["secretKeyRef"]
    pod = node_job(runtime)["template"]["spec"]["template"]["spec"]
    default_ref = env_of(node_container(pod))["HOROVOD_SECRET_KEY"]["valueFrom"]["secretKeyRef"]
    assert job_ref["name"].startswith(trainjob["metadata"]["name"] + "-")
    assert job_ref["name"] != default_ref["name"]
    # The filled pod reads the job's own Secret; both files document how to create it.
    filled = env_of(node_container(effective_pod_template(runtime, trainjob)["spec"]))
    assert filled["HOROVOD_SECRET_KEY"]["valueFrom"]["secretKeyRef"] == job_ref
    create = f"kubectl create secret generic {job_ref['name']}"
    for path in (RUNTIME, TRAINJOB):
        text = path.read_text()
        assert create in text and f"--from-file={job_ref['key']}=/dev/stdin" in text


def test_env_torchrun_and_the_engine_need(runtime, trainjob):
    template = effective_pod_template(runtime, trainjob)
    container = node_container(template["spec"])
    env = env_of(container)
    assert PET_RESERVED <= set(env)
    # csrc/transport/tcp/tcp_options.cc: the rendezvous at MASTER_ADDR:HOROVOD_RENDEZVOUS_PORT
    # (default MASTER_PORT + 1), hosted by rank 0; never torchrun's own store port.
    port = int(env["HOROVOD_RENDEZVOUS_PORT"]["value"])
    assert port == PET_MASTER_PORT + 1
    ports = {p["containerPort"]: p.get("name") for p in container["ports"]}
    assert ports[port] == "hvd-rendezvous" and PET_MASTER_PORT in ports
    assert "HOROVOD_SECRET_KEY" in env
    # No launcher variables of the other modes: torchrun's RANK etc. select the TCP transport.
    assert not {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_HOSTFILE", "OMPI_COMM_WORLD_RANK"} & set(
        env
    )


def test_ranks_per_node_agree_with_resources(runtime, trainjob):
    trainer = trainjob["spec"]["trainer"]
    assert trainer["numNodes"] == runtime["spec"]["mlPolicy"]["numNodes"] == 2
    nproc = nproc_per_node(runtime, trainjob)
    # The TrainJob's explicit value is what "auto" would give for its resources, and what the
    # runtime alone gives for its own: one rank per requested core, no GPUs.
    without = copy.deepcopy(trainjob)
    del without["spec"]["trainer"]["numProcPerNode"]
    bare = {
        "metadata": trainjob["metadata"],
        "spec": {"runtimeRef": trainjob["spec"]["runtimeRef"]},
    }
    assert nproc == nproc_per_node(runtime, without) == nproc_per_node(runtime, bare) == "2"
    res = node_container(effective_pod_template(runtime, trainjob)["spec"])["resources"]
    assert cpus(res["requests"]["cpu"]) >= int(nproc) and not num_gpus(res)
    # Every rank trains on an equal shard of the example's 3200 training rows.
    assert 3200 % (trainer["numNodes"] * int(nproc)) == 0


def test_fails_fast_like_the_mpijob(runtime):
    spec = node_job(runtime)["template"]["spec"]
    assert spec["backoffLimit"] == 0 and spec["template"]["spec"]["restartPolicy"] == "Never"
    pod = spec["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in node_container(pod).get("volumeMounts", [])}
    (shm,) = [v for v in pod["volumes"] if v["name"] == mounts["/dev/shm"]]
    assert shm["emptyDir"]["medium"] == "Memory"


def test_says_it_was_validated_offline_only():
    for path in (RUNTIME, TRAINJOB):
        text = path.read_text()
        assert "Validated offline only" in text and "never run on a real cluster" in text.lower()
