"""The Kubernetes chart (charts/horovod) rendered offline by Helm's own Go code (PyPI's
helm-python-sdk wheel, no helm binary, no cluster), and the objects it renders."""

import yaml

from tests.support.paths import ROOT

CHART = ROOT / "charts" / "horovod"
NAMESPACE = "ml"
# The oldest and newest Kubernetes minor versions whose schemas the objects are checked
# against (kubernetes-validate, strict): Chart.yaml's kubeVersion and the package's newest.
KUBE_VERSIONS = ("1.29.0", "1.37.0")


def helm():
    import helm_python  # imported late: a missing wheel fails the tests that need it, by name

    return helm_python


def render(values=None, name="demo", namespace=NAMESPACE):
    """{template path: [objects]} as `helm install --dry-run` would make them (NOTES.txt as its
    text). Raises helm_python.HelmValuesError for values the schema refuses."""
    with helm().Chart.load(CHART) as chart:
        out = chart.render(values or {}, name=name, namespace=namespace, is_install=True)
    return {
        path: text if path.endswith(".txt") else [d for d in yaml.safe_load_all(text) if d]
        for path, text in out.items()
    }


def objects(rendered):
    return [o for path, objs in rendered.items() if not path.endswith(".txt") for o in objs]


def find(rendered, kind, component):
    """The one object of this kind and app.kubernetes.io/component."""
    found = [
        o
        for o in objects(rendered)
        if o["kind"] == kind
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, f"{len(found)} {kind}(s) of component {component}"
    return found[0]


def pod_spec(obj):
    """The pod spec of a Pod, Job or StatefulSet."""
    return obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]


def is_hook(obj, *hooks):
    declared = obj["metadata"].get("annotations", {}).get("helm.sh/hook", "")
    return any(h in declared.split(",") for h in hooks)
