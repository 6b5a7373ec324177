"""Rendered Kubernetes pod specs run as Docker containers, for tests/k8s/test_run_rendered.py.

This is not Kubernetes: no scheduler, kubelet, CNI, CoreDNS or API server. It translates what a
pod of the chart says (image, command/args, env, Secret, ConfigMap and emptyDir volumes and their
mounts, ports, the readiness probe, DNS search domains, the service account's files) into one
container on a Docker network whose embedded DNS answers for the pod's stable names and its
headless Service, and refuses every field it does not translate: a field added to the chart
fails this test until it is translated here (or the test says why it need not be).
"""

import base64
import os
import time

import pytest

from tests.support.images import TEST_LABEL

# What each level may hold; anything else is refused by name.
POD_FIELDS = {
    "containers",
    "volumes",
    "restartPolicy",
    "automountServiceAccountToken",
    "serviceAccountName",
    "dnsConfig",
}
CONTAINER_FIELDS = {
    "name",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "env",
    "ports",
    "readinessProbe",
    "terminationMessagePolicy",
    "volumeMounts",
}
PROBE_FIELDS = {"tcpSocket", "periodSeconds", "failureThreshold"}
MOUNT_FIELDS = {"name", "mountPath", "readOnly"}
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_HOST = "kubernetes.default.svc"  # the stand-in API server's name on the network


def refuse_unknown(what, obj, allowed):
    extra = sorted(set(obj) - allowed)
    if extra:
        pytest.fail(
            f"{what}: fields {extra} are not translated to Docker (tests/support/podrun.py)"
        )


def _quantity_bytes(q):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}
    for unit, factor in units.items():
        if str(q).endswith(unit):
            return int(float(str(q)[: -len(unit)]) * factor)
    return int(q)


class Translated:
    """docker run arguments for one pod, and the host folders its volumes were written to."""

    def __init__(self, spec, name, workdir, objects, api=None):
        """spec: the pod spec; name: the pod's name (also the container's); objects: {("Secret"|
        "ConfigMap", name): data} the volumes are filled from (Secret data base64, as stored);
        api: (token, ca.crt path, namespace) for a pod that mounts its service account."""
        refuse_unknown(f"pod {name}", spec, POD_FIELDS)
        # Never: run once (Jobs, hooks, the test pod); Always (a StatefulSet's, the default):
        # Docker restarts it too.
        policy = spec.get("restartPolicy", "Always")
        if policy not in ("Never", "Always"):
            pytest.fail(f"pod {name}: restartPolicy {policy!r} not translated")
        (c,) = spec["containers"]
        refuse_unknown(f"container {name}/{c['name']}", c, CONTAINER_FIELDS)
        if c.get("imagePullPolicy", "IfNotPresent") not in ("IfNotPresent", "Never"):
            pytest.fail(f"{name}: imagePullPolicy {c['imagePullPolicy']} would pull; nothing can")
        self.name, self.image = name, c["image"]
        self.kwargs = {"name": name, "hostname": name, "detach": True, "labels": dict(TEST_LABEL)}
        if policy == "Always":
            self.kwargs["restart_policy"] = {"Name": "always"}
        # Kubernetes: command replaces the image's ENTRYPOINT, args its CMD (Docker: the same,
        # and a new entrypoint drops the image's CMD as Kubernetes does).
        if "command" in c:
            self.kwargs["entrypoint"] = c["command"]
        if "args" in c:
            self.kwargs["command"] = c["args"]
        env = {}
        for e in c.get("env", []):
            refuse_unknown(f"{name} env {e.get('name')}", e, {"name", "value"})
            env[e["name"]] = e["value"]
        self.ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        for p in c.get("ports", []):
            refuse_unknown(f"{name} port", p, {"name", "containerPort"})
        self.volumes, self.tmpfs, self.dirs = {}, {}, {}
        by_name = {v["name"]: v for v in spec.get("volumes", [])}
        for m in c.get("volumeMounts", []):
            refuse_unknown(f"{name} mount {m['name']}", m, MOUNT_FIELDS)
            self._mount(by_name.pop(m["name"]), m, workdir, objects)
        if by_name:
            pytest.fail(f"pod {name}: volumes {sorted(by_name)} are never mounted")
        if spec.get("automountServiceAccountToken", True):
            if api is None:
                pytest.fail(f"pod {name} mounts a service account token but has no API to talk to")
            token, ca, ns = api
            sa = self._dir(workdir, "serviceaccount")
            for fname, text in (("token", token), ("namespace", ns)):
                with open(os.path.join(sa, fname), "w") as f:
                    f.write(text)
            with open(ca) as src, open(os.path.join(sa, "ca.crt"), "w") as dst:
                dst.write(src.read())
            self.volumes[sa] = {"bind": SA_DIR, "mode": "ro"}
            env.update(KUBERNETES_SERVICE_HOST=API_HOST, KUBERNETES_SERVICE_PORT="443")
        elif "serviceAccountName" in spec:
            pytest.fail(f"pod {name}: a service account without its token is not translated")
        searches = spec.get("dnsConfig", {}).get("searches")
        refuse_unknown(f"pod {name} dnsConfig", spec.get("dnsConfig", {}), {"searches"})
        if searches:
            self.kwargs["dns_search"] = searches
        self.kwargs["environment"] = env
        self.kwargs["volumes"] = self.volumes
        if self.tmpfs:
            self.kwargs["tmpfs"] = self.tmpfs
        self.probe = c.get("readinessProbe")
        if self.probe:
            refuse_unknown(f"{name} readinessProbe", self.probe, PROBE_FIELDS)
            refuse_unknown(f"{name} tcpSocket", self.probe["tcpSocket"], {"port"})
            port = self.probe["tcpSocket"]["port"]
            port = self.ports[port] if isinstance(port, str) else port
            # The kubelet connects to the pod's port; so does this healthcheck, from inside.
            check = f"import socket; socket.create_connection(('127.0.0.1', {port}), 1).close()"
            period = self.probe.get("periodSeconds", 10)
            self.kwargs["healthcheck"] = {
                "test": ["CMD", "python", "-c", check],
                "interval": int(period * 1e9),
                "timeout": int(1e9),
                "retries": self.probe.get("failureThreshold", 3),
                "start_period": 0,
            }

    def _dir(self, workdir, what):
        path = os.path.join(workdir, self.name, what)
        os.makedirs(path)
        return path

    def _mount(self, vol, mount, workdir, objects):
        kinds = set(vol) - {"name"}
        if kinds == {"emptyDir"}:
            refuse_unknown(f"{self.name} emptyDir", vol["emptyDir"], {"medium", "sizeLimit"})
            if vol["emptyDir"].get("medium") != "Memory":
                pytest.fail(f"{self.name}: emptyDir on disk is not translated")
            size = _quantity_bytes(vol["emptyDir"]["sizeLimit"])
            if mount["mountPath"] == "/dev/shm":
                self.kwargs["shm_size"] = size  # Docker's own /dev/shm, memory-backed
            else:
                self.tmpfs[mount["mountPath"]] = f"size={size}"
            return
        if kinds == {"secret"}:
            src = vol["secret"]
            refuse_unknown(f"{self.name} secret", src, {"secretName", "defaultMode"})
            data = {
                k: base64.b64decode(v) for k, v in objects[("Secret", src["secretName"])].items()
            }
        elif kinds == {"configMap"}:
            src = vol["configMap"]
            refuse_unknown(f"{self.name} configMap", src, {"name", "defaultMode"})
            data = {k: v.encode() for k, v in objects[("ConfigMap", src["name"])].items()}
        else:
            pytest.fail(f"{self.name}: volume {vol['name']} of kind {sorted(kinds)} not translated")
        folder = self._dir(workdir, vol["name"])
        for key, content in data.items():
            path = os.path.join(folder, key)
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, src.get("defaultMode", 0o644))
        if not mount.get("readOnly"):
            pytest.fail(f"{self.name}: Secret and ConfigMap volumes are mounted read-only")
        self.volumes[folder] = {"bind": mount["mountPath"], "mode": "ro"}


def start(client, translated, network, aliases=()):
    """Starts the container on the network, answering to its name and the aliases."""
    endpoint = client.api.create_endpoint_config(aliases=list(aliases))
    c = client.containers.create(
        translated.image,
        network=network,
        networking_config={network: endpoint},
        **translated.kwargs,
    )
    c.start()
    return c


def wait_ready(container, timeout):
    """Waits until the translated readiness probe passes (Docker health 'healthy')."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        container.reload()
        if container.status != "running":
            pytest.fail(f"{container.name} exited:\n{container.logs().decode()[-3000:]}")
        if container.attrs["State"].get("Health", {}).get("Status") == "healthy":
            return
        time.sleep(0.5)
    pytest.fail(f"{container.name} not ready within {timeout} s:\n{container.logs().decode()}")


def wait_log(container, text, timeout, what):
    """Waits until the container's log holds text (what: what that line means, for the error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        container.reload()
        log = container.logs().decode()
        if text in log:
            return
        if container.status not in ("created", "running"):
            pytest.fail(f"{container.name} exited before {what}:\n{log[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"{container.name}: not {what} within {timeout} s:\n{container.logs().decode()}")


def wait_exit(container, timeout):
    """(exit code, log) of a run-to-completion pod (a Job's or a test hook's)."""
    try:
        rc = container.wait(timeout=timeout)["StatusCode"]
    except Exception:  # requests' timeout: the pod outlived its bound
        container.kill()
        pytest.fail(
            f"{container.name} still running after {timeout} s:\n{container.logs().decode()}"
        )
    return rc, container.logs().decode()
