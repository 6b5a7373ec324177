"""The Kubernetes chart's key pair: `python -m horovod.runner.cluster.k8s_keys`, run by the
chart's pre-install hook Job (charts/horovod/templates/keys-hook.yaml).

Makes one ed25519 pair with ssh-keygen (keys.ensure_keys, as the compose launcher does) and
stores it through the API server the pod is in:

- Secret <--secret>: `id_ed25519` and `id_ed25519.pub`, mounted by the launcher and the test pod;
- ConfigMap <--configmap>: `authorized_keys` only, mounted by the workers, which thus never see
  the private half.

Why not Helm's genPrivateKey: it writes ed25519 keys as PKCS#8 PEM, which OpenSSH 9.2 (bookworm)
refuses ("invalid format"), and no template function can derive the `ssh-ed25519 AAAA...` line
that authorized_keys needs (that takes curve arithmetic). So the key is made here, at install
time, inside the cluster: never in values, the chart, an image or git.

An existing Secret is kept (helm upgrade, or a re-run of the hook): its public half is then
re-published. `--delete` removes both (the chart's post-delete hook)."""

import argparse
import base64
import json
import os
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request

from horovod.runner.cluster import keys

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
REACH_S = 60  # how long an unreachable API server is retried before the hook fails


def log(msg):
    print(f"k8s_keys: {msg}", file=sys.stderr, flush=True)


class Api:
    """The few calls needed, with the pod's service account (in-cluster config)."""

    def __init__(self, sa_dir=None, reach_s=REACH_S):
        sa_dir = sa_dir or SA_DIR
        self.reach_s, self.warned = reach_s, False
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise RuntimeError("not in a Kubernetes pod: $KUBERNETES_SERVICE_HOST is not set")
        self.base = f"https://{host}:{port}"
        with open(os.path.join(sa_dir, "token")) as f:
            self.token = f.read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))

    def call(self, method, path, body=None):
        """(status, decoded JSON body or None); HTTP errors are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        # A pod's network (CNI, the Service's rules, DNS) may not be ready the instant it starts:
        # an unreachable API server is retried for a bounded time, then named in the error.
        deadline = time.monotonic() + self.reach_s
        while True:
            try:
                with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                    return r.status, json.loads(r.read() or b"null")
            except urllib.error.HTTPError as e:
                return e.code, None
            except (urllib.error.URLError, OSError) as e:
                reason = getattr(e, "reason", e)
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"{method} {self.base}{path}: the API server did not answer within "
                        f"{self.reach_s:.0f} s ({reason})"
                    ) from None
                if not self.warned:
                    log(f"API server {self.base} not reachable yet ({reason}); retrying")
                    self.warned = True
                time.sleep(1)


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _object(kind, name, labels, payload):
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "labels": labels},
        **payload,
    }


def publish(api, ns, secret, configmap, labels):
    """Creates the Secret (unless it exists) and the ConfigMap from its public half."""
    status, existing = api.call("GET", f"/api/v1/namespaces/{ns}/secrets/{secret}")
    if status == 200:
        pub = base64.b64decode(existing["data"]["id_ed25519.pub"]).decode()
        log(f"Secret {secret} exists: kept")
    elif status == 404:
        with tempfile.TemporaryDirectory() as tmp:
            key, _ = keys.ensure_keys(tmp, None)
            with open(key) as f:
                private = f.read()
            with open(key + ".pub") as f:
                pub = f.read()
        body = _object(
            "Secret",
            secret,
            labels,
            {"type": "Opaque", "data": {"id_ed25519": _b64(private), "id_ed25519.pub": _b64(pub)}},
        )
        status, _ = api.call("POST", f"/api/v1/namespaces/{ns}/secrets", body)
        if status != 201:
            raise RuntimeError(f"creating Secret {secret} failed: HTTP {status}")
        log(f"made Secret {secret} (ed25519, {pub.split()[-1]})")
    else:
        raise RuntimeError(f"reading Secret {secret} failed: HTTP {status}")
    body = _object("ConfigMap", configmap, labels, {"data": {"authorized_keys": pub}})
    status, _ = api.call("POST", f"/api/v1/namespaces/{ns}/configmaps", body)
    if status == 409:  # left by an earlier run: make it match the Secret
        status, _ = api.call("PUT", f"/api/v1/namespaces/{ns}/configmaps/{configmap}", body)
    if status not in (200, 201):
        raise RuntimeError(f"writing ConfigMap {configmap} failed: HTTP {status}")
    log(f"ConfigMap {configmap} holds the public half (authorized_keys)")


def delete(api, ns, secret, configmap):
    for kind, name in (("secrets", secret), ("configmaps", configmap)):
        status, _ = api.call("DELETE", f"/api/v1/namespaces/{ns}/{kind}/{name}")
        if status not in (200, 202, 404):
            raise RuntimeError(f"deleting {kind}/{name} failed: HTTP {status}")
        log(f"{kind}/{name}: " + ("already gone" if status == 404 else "deleted"))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m horovod.runner.cluster.k8s_keys")
    p.add_argument("--secret", required=True, help="Secret for the key pair (launcher)")
    p.add_argument("--configmap", required=True, help="ConfigMap for authorized_keys (workers)")
    p.add_argument("--label", action="append", default=[], help="KEY=VALUE for both objects")
    p.add_argument("--delete", action="store_true", help="delete both instead")
    args = p.parse_args(argv)
    labels = dict(kv.split("=", 1) for kv in args.label)
    try:
        api = Api(SA_DIR)
        with open(os.path.join(SA_DIR, "namespace")) as f:
            ns = f.read().strip()
        if args.delete:
            delete(api, ns, args.secret, args.configmap)
        else:
            publish(api, ns, args.secret, args.configmap, labels)
    except (OSError, RuntimeError, KeyError) as e:
        log(f"failed: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
