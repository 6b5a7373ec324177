"""mpi: Open MPI + mpi4py work as root and as mpiuser; sshd/ssh are configured for mpirun."""

import time

import pytest
import testinfra

pytestmark = pytest.mark.layer("mpi")

ALLREDUCE = (
    "from mpi4py import MPI; import numpy as np; c = MPI.COMM_WORLD; "
    "a = np.full(1 << 20, c.rank + 1.0); c.Allreduce(MPI.IN_PLACE, a); "
    "assert (a == c.size * (c.size + 1) / 2).all(); print(c.size)"
)


@pytest.mark.parametrize("package", ["openmpi-bin", "libopenmpi3"])
def test_openmpi_is_the_pinned_debian_package(host, pins, package):
    assert host.package(package).version == pins["OPENMPI_DEB_VERSION"]


def test_mpi4py_uses_the_system_open_mpi(host, pins, run_ok):
    lib = run_ok(host, "python -c 'from mpi4py import MPI; print(MPI.Get_library_version())'")
    assert lib.startswith(f"Open MPI v{pins['OPENMPI_VERSION']}")


def test_mpi_environment(inspect):
    env = inspect["Env"]
    for key in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
        assert env[key] == "1"
    assert env["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"


def test_tcp_transport_sends_large_messages_without_emulated_put(host, run_ok):
    # From the system-wide file, so every Open MPI process in the image takes it however started
    # (docs/shaped-links.md: two ranks sending to each other got 0.48-0.59 of a link with put).
    out = run_ok(host, "ompi_info --param btl tcp --level 9")
    flags = next(line for line in out.splitlines() if '"btl_tcp_flags"' in line)
    assert 'current value: "send,inplace,need-ack,need-csum,hetero-rdma"' in flags, flags
    assert "data source: file (/etc/openmpi/openmpi-mca-params.conf" in flags, flags


@pytest.mark.parametrize("who", ["root", "mpiuser"])
def test_allreduce_np2(host, user_host, run_ok, who):
    out = run_ok(user_host if who == "mpiuser" else host, f'mpirun -np 2 python -c "{ALLREDUCE}"')
    assert out.split() == ["2", "2"]


def test_np2_on_a_one_cpu_container(client, ref):
    out = client.containers.run(
        ref, ["mpirun", "-np", "2", "python", "-c", ALLREDUCE], cpuset_cpus="0", remove=True
    )
    assert out.decode().split() == ["2", "2"]


def test_sshd_settings(host, run_ok):
    # `sshd -T` needs a host key: a throw-away one in /tmp, removed at once.
    out = run_ok(
        host,
        "k=$(mktemp -u); ssh-keygen -q -t ed25519 -N '' -f $k && "
        "sshd -T -h $k; rc=$?; rm -f $k $k.pub; exit $rc",
    )
    settings = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert settings["port"] == "2222"
    assert settings["passwordauthentication"] == "no"
    assert settings["kbdinteractiveauthentication"] == "no"
    assert settings["permitemptypasswords"] == "no"
    assert settings["pubkeyauthentication"] == "yes"
    assert settings["authenticationmethods"] == "publickey"
    assert settings["permitrootlogin"] in ("without-password", "prohibit-password")


def test_ssh_client_settings(host, run_ok):
    settings = dict(line.split(" ", 1) for line in run_ok(host, "ssh -G worker-1").splitlines())
    assert settings["port"] == "2222"
    assert settings["stricthostkeychecking"] in ("false", "no")
    assert settings["userknownhostsfile"] == "/dev/null"
    assert settings["batchmode"] == "yes"


def test_image_has_no_host_keys(host):
    assert host.file("/etc/ssh").is_directory
    assert not [f for f in host.file("/etc/ssh").listdir() if f.startswith("ssh_host_")]


def test_sshd_entrypoint_makes_host_keys(containers, ref):
    c = containers.start(ref, ["/usr/sbin/sshd", "-D", "-e"])
    worker = testinfra.get_host(f"docker://{c.id}")
    for _ in range(50):
        if worker.socket("tcp://0.0.0.0:2222").is_listening:
            break
        time.sleep(0.2)
    assert worker.socket("tcp://0.0.0.0:2222").is_listening
    assert worker.file("/etc/ssh/ssh_host_ed25519_key").mode == 0o600
    assert worker.process.filter(comm="sshd")
