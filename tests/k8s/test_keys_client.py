"""The key hook's API client (horovod.runner.cluster.k8s_keys.Api) against the stand-in API server
run here as a process (no docker): an API server that is not listening yet is waited for, within
a bound that the error names."""

import socket
import subprocess
import sys
import time

import pytest

from horovod.runner.cluster import k8s_keys
from tests.support.paths import ROOT

APISERVER = ROOT / "tests" / "k8s" / "apiserver.py"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sa(tmp_path, monkeypatch):
    """A service account folder and TLS pair for localhost; the port the server will take."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + [
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ]
        + ["-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "ca.crt")],
        check=True,
        capture_output=True,
    )
    (tmp_path / "token").write_text("t0k3n")
    (tmp_path / "namespace").write_text("default")
    (tmp_path / "store").mkdir()
    port = _free_port()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "localhost")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    return tmp_path, port


def test_a_late_api_server_is_waited_for(sa, capfd):
    folder, port = sa
    api = k8s_keys.Api(str(folder), reach_s=30)
    args = [str(folder / "ca.crt"), str(folder / "key.pem"), "t0k3n", str(folder / "store")]
    # The server starts 2 s after the client's first try.
    server = subprocess.Popen(
        ["sh", "-c", 'sleep 2; exec "$0" "$@"', sys.executable, str(APISERVER), *args, str(port)]
    )
    try:
        start = time.monotonic()
        status, _ = api.call("GET", "/api/v1/namespaces/default/secrets/missing")
        waited = time.monotonic() - start
    finally:
        server.kill()
        server.wait()
    assert status == 404
    assert 1.5 < waited < 30, waited
    err = capfd.readouterr().err
    assert err.count("not reachable yet") == 1, err


def test_an_absent_api_server_fails_within_the_bound_and_names_it(sa):
    folder, port = sa
    api = k8s_keys.Api(str(folder), reach_s=2)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        api.call("GET", "/api/v1/namespaces/default/secrets/x")
    assert time.monotonic() - start < 10
    msg = str(e.value)
    assert f"https://localhost:{port}/api/v1/namespaces/default/secrets/x" in msg, msg
    assert "did not answer within 2 s" in msg, msg
