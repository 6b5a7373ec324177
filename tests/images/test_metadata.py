"""Versions are reported three ways that must agree with versions.env: OCI/our labels, ENV, and
what the software itself says (plus `horovodrun --check-build` in test_horovod.py)."""
import pytest

# pin -> (layer that sets it, label, shell command printing the installed version)
PINNED = {
    "DEBIAN_VERSION": ("base", "io.horovod.debian.version", "cut -d. -f1 /etc/debian_version"),
    "PYTHON_VERSION": ("base", "io.horovod.python.version",
                       "python -c 'import platform; print(platform.python_version())'"),
    "OPENMPI_VERSION": ("mpi", "io.horovod.openmpi.version",
                        "mpirun --version | sed -n 's/^mpirun (Open MPI) //p'"),
    "MPI4PY_VERSION": ("mpi", "io.horovod.mpi4py.version",
                       "python -c 'import mpi4py; print(mpi4py.__version__)'"),
    "NUMPY_VERSION": ("mpi", "io.horovod.numpy.version",
                      "python -c 'import numpy; print(numpy.__version__)'"),
    "TENSORFLOW_VERSION": ("tensorflow", "io.horovod.tensorflow.version",
                           "python -c 'import importlib.metadata as m; print(m.version(\"tensorflow-cpu\"))'"),
    "HOROVOD_VERSION": ("horovod", "io.horovod.version",
                        "python -c 'import horovod; print(horovod.__version__)'"),
}


def _cases():
    for key, (layer, label, command) in PINNED.items():
        yield pytest.param(key, label, command, marks=pytest.mark.layer(layer), id=key)


@pytest.mark.parametrize("key,label,command", list(_cases()))
def test_label_env_and_software_agree_with_pin(key, label, command, pins, inspect, host, run_ok):
    assert inspect["Labels"].get(label) == pins[key], f"label {label}"
    assert inspect["Env"].get(key) == pins[key], f"ENV {key}"
    assert run_ok(host, command) == pins[key], f"installed version ({command})"


@pytest.mark.layer("base")
def test_oci_labels(inspect):
    labels = inspect["Labels"]
    for key in ("title", "description", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    # Custom keys must use reverse DNS, never the org.opencontainers namespace.
    assert all(k.startswith(("org.opencontainers.image.", "io.horovod.")) for k in labels), labels


@pytest.mark.layer("horovod")
def test_release_labels(inspect, pins):
    labels = inspect["Labels"]
    assert labels["org.opencontainers.image.version"] == pins["HOROVOD_VERSION"]
    assert labels["org.opencontainers.image.title"] == "horovod"
    assert labels["org.opencontainers.image.revision"]


@pytest.mark.layer("horovod")
def test_latest_is_this_build(client, ref):
    assert client.images.get("horovod:latest").id == client.images.get(ref).id
