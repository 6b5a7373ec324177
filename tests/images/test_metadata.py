"""Versions are reported three ways that must agree with versions.env: OCI/our labels, ENV, and
what the software itself says (plus `horovodrun --check-build` in test_horovod.py)."""

import pytest

# What the CUDA runtime and NCCL say they are, through the dynamic loader (no GPU needed).
CTYPES = (
    "python -c 'import ctypes; v = ctypes.c_int(); "
    'assert ctypes.CDLL("{lib}").{call}(ctypes.byref(v)) == 0; print({fmt})\''
)

# pin -> (layer that sets it, label, shell command printing the installed version);
# TF_PACKAGE stands for the flavour's TensorFlow wheel (tensorflow-cpu or tensorflow).
PINNED = {
    "DEBIAN_VERSION": ("base", "io.horovod.debian.version", "cut -d. -f1 /etc/debian_version"),
    "PYTHON_VERSION": (
        "base",
        "io.horovod.python.version",
        "python -c 'import platform; print(platform.python_version())'",
    ),
    "OPENMPI_VERSION": (
        "mpi",
        "io.horovod.openmpi.version",
        "mpirun --version | sed -n 's/^mpirun (Open MPI) //p'",
    ),
    "MPI4PY_VERSION": (
        "mpi",
        "io.horovod.mpi4py.version",
        "python -c 'import mpi4py; print(mpi4py.__version__)'",
    ),
    "NUMPY_VERSION": (
        "mpi",
        "io.horovod.numpy.version",
        "python -c 'import numpy; print(numpy.__version__)'",
    ),
    "CUDA_VERSION": (
        "cuda",
        "io.horovod.cuda.version",
        CTYPES.format(
            lib="libcudart.so.12",
            call="cudaRuntimeGetVersion",
            fmt='v.value // 1000, v.value % 1000 // 10, sep="."',
        ),
    ),
    "NCCL_VERSION": (
        "cuda",
        "io.horovod.nccl.version",
        CTYPES.format(
            lib="libnccl.so.2",
            call="ncclGetVersion",
            fmt='v.value // 10000, v.value // 100 % 100, v.value % 100, sep="."',
        ),
    ),
    "TENSORFLOW_VERSION": (
        "tensorflow",
        "io.horovod.tensorflow.version",
        "python -c 'import importlib.metadata as m; print(m.version(\"TF_PACKAGE\"))'",
    ),
    "HOROVOD_VERSION": (
        ("horovod", "horovod-torch"),
        "io.horovod.version",
        "python -c 'import horovod; print(horovod.__version__)'",
    ),
}


def _cases():
    for key, (layer, label, command) in PINNED.items():
        layers = layer if isinstance(layer, tuple) else (layer,)
        yield pytest.param(key, label, command, marks=pytest.mark.layer(*layers), id=key)


@pytest.mark.parametrize("key,label,command", list(_cases()))
def test_label_env_and_software_agree_with_pin(
    key, label, command, pins, inspect, host, run_ok, tf_package
):
    command = command.replace("TF_PACKAGE", tf_package)
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


@pytest.mark.layer("horovod", "horovod-torch")
def test_release_labels(inspect, pins, framework):
    labels = inspect["Labels"]
    assert labels["org.opencontainers.image.version"] == pins["HOROVOD_VERSION"]
    assert labels["org.opencontainers.image.title"] == "horovod"
    assert labels["org.opencontainers.image.revision"]
    assert labels["io.horovod.framework"] == inspect["Env"]["HOROVOD_FRAMEWORK"] == framework


@pytest.mark.layer("horovod", "horovod-torch")
def test_latest_is_this_build(client, ref, latest_ref):
    """horovod:latest(-torch) (cpu) or horovod:latest(-torch)-gpu (gpu) is the image just built."""
    assert client.images.get(latest_ref).id == client.images.get(ref).id
