"""base: Debian, Python in /opt/venv, tini as init, the non-root user, tools for debugging."""

import pytest

pytestmark = pytest.mark.layer("base")

KEY_SCAN = r"""
import os, re, sys
# A PEM private key file: the header, optional "Name: value" lines, then base64 lines.  ELF
# files are skipped: tools print the header (ssh-keygen) and libgnutls embeds the public FIPS
# self-test keys; neither is a key anyone could use against this image.
pem = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----\r?\n(?:[\w-]+: [^\n]*\n)*\r?\n?"
                 rb"[A-Za-z0-9+/=]{40,}\r?\n")
found = []
for top, dirs, files in os.walk(sys.argv[1]):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in files:
        path = os.path.join(top, name)
        if re.fullmatch(r"ssh_host_.*_key", name) or name in ("id_rsa", "id_ecdsa", "id_ed25519"):
            found.append(path)
            continue
        try:
            if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > 64 << 20:
                continue
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"PRIVATE KEY-----" in data and not data.startswith(b"\x7fELF") and pem.search(data):
            found.append(path)
print("\n".join(found))
"""


def test_debian_release(host, pins):
    assert host.file("/etc/debian_version").content_string.startswith(pins["DEBIAN_VERSION"] + ".")
    assert f"VERSION_CODENAME={pins['DEBIAN_SUITE']}" in host.file("/etc/os-release").content_string


def test_python_from_debian_in_a_venv(host, pins, run_ok):
    assert host.package("python3").version == pins["PYTHON_DEB_VERSION"]
    assert run_ok(host, "command -v python") == "/opt/venv/bin/python"
    assert run_ok(host, "python -c 'import sys; print(sys.base_prefix)'") == "/usr"
    assert run_ok(host, "pip --version").endswith("(python 3.11)")


@pytest.mark.parametrize("command", ["tini", "ss", "ip", "ps", "pip"])
def test_tools(host, command):
    assert host.exists(command)


def test_tini_is_pid1(host, inspect):
    assert inspect["Entrypoint"][0] == "/usr/bin/tini"
    assert host.process.get(pid=1).comm == "tini"


def test_non_root_user(host, user_host, run_ok):
    user = host.user("mpiuser")
    assert (user.uid, user.shell, user.home) == (1000, "/bin/bash", "/home/mpiuser")
    assert host.file("/home/mpiuser").user == "mpiuser"
    assert run_ok(user_host, "id -un") == "mpiuser"
    assert run_ok(user_host, "python -c 'import sys; print(sys.prefix)'") == "/opt/venv"


def test_pip_dependencies_consistent(host, run_ok):
    # From the mpi layer on, pip-check (images/mpi/pip-check.sh) accepts exactly what the layers
    # declared in /etc/pip-check.d (tf-keras's `tensorflow`, torch's CUDA wheels), no more.
    run_ok(host, "if command -v pip-check >/dev/null; then pip-check; else pip check; fi")


def test_no_apt_leftovers(host, run_ok):
    assert run_ok(host, "ls /var/lib/apt/lists | grep -v -e '^lock$' -e '^partial$' || true") == ""
    assert run_ok(host, "ls /var/cache/apt/archives | grep '\\.deb$' || true") == ""


# Also on the spark image: with --image all a leaf on horovod gets only its own checks, and the
# layer must hold no secret either (JDK and pyspark trees included).
@pytest.mark.layer("base", "spark")
def test_no_private_key_in_image(containers, ref):
    """No private key (host or user) in the image filesystem: fresh container, nothing started."""
    c = containers.start(ref)
    rc, out = c.exec_run(["python3", "-c", KEY_SCAN, "/"])
    assert rc == 0, out
    assert out.decode().split() == []


def test_key_scan_finds_planted_keys(containers, ref):
    """The scan above must not pass vacuously."""
    c = containers.start(ref)
    body = "QUJD" * 16
    plant = (
        f"mkdir /tmp/k && printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\n{body}\\n' >/tmp/k/a"
        " && touch /tmp/k/ssh_host_rsa_key /tmp/k/harmless"
    )
    assert c.exec_run(["sh", "-c", plant]).exit_code == 0
    rc, out = c.exec_run(["python3", "-c", KEY_SCAN, "/tmp/k"])
    assert sorted(out.decode().split()) == ["/tmp/k/a", "/tmp/k/ssh_host_rsa_key"]
