"""A real sshd: one container serves (keys mounted at start), another logs in over a test
network.  The key pair is generated for this test only, in a temporary directory."""

import time

import pytest
from docker.types import Mount

pytestmark = pytest.mark.layer("mpi")


@pytest.fixture
def keys(tmp_path, client, ref):
    """A fresh ed25519 pair made by the image's ssh-keygen (the host may not have one)."""
    client.containers.run(
        ref,
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", "/keys/id_ed25519"],
        volumes={str(tmp_path): {"bind": "/keys", "mode": "rw"}},
        remove=True,
    )
    return tmp_path


@pytest.fixture
def cluster(network, containers, keys, ref):  # network first: it is torn down last
    """(server, client) containers on one network: the server runs sshd with the public key
    authorized for mpiuser and root; the client has the private key."""
    pub = str(keys / "id_ed25519.pub")
    authorized = [
        Mount(f"{home}/.ssh/authorized_keys", pub, type="bind", read_only=True)
        for home in ("/home/mpiuser", "/root")
    ]
    server = containers.start(
        ref,
        ["/usr/sbin/sshd", "-D", "-e"],
        network=network.name,
        name=f"{network.name}-worker-1",
        mounts=authorized,
    )
    client = containers.start(
        ref,
        network=network.name,
        name=f"{network.name}-launcher",
        mounts=[
            Mount("/root/.ssh/id_ed25519", str(keys / "id_ed25519"), type="bind", read_only=True)
        ],
    )
    for _ in range(100):  # sshd makes its host keys first
        if (
            server.exec_run(["sh", "-c", "ss -Hltn 'sport = :2222' | grep -q LISTEN"]).exit_code
            == 0
        ):
            break
        time.sleep(0.1)
    return server, client


def ssh(client, *args):
    rc, out = client.exec_run(["ssh", *args], demux=True)
    return rc, (out[0] or b"").decode(), (out[1] or b"").decode()


def test_key_login_as_mpiuser(cluster):
    server, client = cluster
    rc, out, err = ssh(
        client,
        f"mpiuser@{server.name}",
        "id -un; python -c 'import mpi4py; print(mpi4py.__version__)'",
    )
    assert rc == 0, err
    assert out.split()[0] == "mpiuser"


def test_key_login_as_root(cluster):
    server, client = cluster
    rc, out, err = ssh(client, server.name, "id -un")
    assert (rc, out.strip()) == (0, "root"), err


def test_password_login_is_refused(cluster):
    server, client = cluster
    # Give mpiuser a real password: it must still not be accepted, nor even offered.
    assert server.exec_run(["sh", "-c", "echo mpiuser:secret | chpasswd"]).exit_code == 0
    rc, out, err = ssh(
        client,
        "-o",
        "PubkeyAuthentication=no",
        "-o",
        "BatchMode=yes",
        "-o",
        "PreferredAuthentications=password,keyboard-interactive",
        f"mpiuser@{server.name}",
        "true",
    )
    assert rc == 255
    assert "Permission denied (publickey)" in err


def test_mpirun_over_ssh(cluster):
    """mpirun starts its daemon on the worker through ssh (port 2222 from ssh_config)."""
    server, client = cluster
    rc, out = client.exec_run(
        [
            "mpirun",
            "-np",
            "2",
            "-H",
            f"{server.name}:2",
            "--mca",
            "btl_tcp_if_include",
            "eth0",
            "--mca",
            "oob_tcp_if_include",
            "eth0",
            "hostname",
        ]
    )
    assert rc == 0, out.decode()
    assert out.decode().split() == [server.attrs["Config"]["Hostname"]] * 2
