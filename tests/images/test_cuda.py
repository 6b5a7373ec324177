"""cuda (GPU flavour only; deselected on cpu, whose chain has no cuda layer): the nvidia-* wheels at
their pins, found by the dynamic loader, and the environment the NVIDIA container runtime reads.
Nothing here needs a GPU or a driver, and none is present where this runs: what a real GPU
would exercise (kernels, NCCL over NVLink/PCIe) is not tested."""

import re

import pytest

pytestmark = pytest.mark.layer("cuda")

SITE = "/opt/venv/lib/python3.11/site-packages"


def test_nvidia_wheels_at_their_pins(host, nvidia_wheels, framework, pins):
    """Exactly the pinned set: nothing unpinned slipped in as a dependency (the torch layer adds
    its TORCH_GPU_EXTRAS, pinned too)."""
    installed = {
        name.replace("_", "-").lower(): p["version"]
        for name, p in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()
        if name.lower().startswith("nvidia")
    }
    if framework == "torch":
        extras = dict(e.split("==") for e in pins["TORCH_GPU_EXTRAS"].split(","))
        nvidia_wheels = {
            **nvidia_wheels,
            **{k: v for k, v in extras.items() if k.startswith("nvidia")},
        }
    assert installed == nvidia_wheels


@pytest.mark.parametrize(
    "soname,package", [("libcudart.so.12", "cuda_runtime"), ("libnccl.so.2", "nccl")]
)
def test_loader_finds_the_wheels_libraries(host, run_ok, soname, package):
    """ldconfig's cache (not LD_LIBRARY_PATH) resolves them to the wheels in the venv."""
    cache = run_ok(host, "ldconfig -p")
    paths = re.findall(rf"^\s+{re.escape(soname)} \(.*\) => (\S+)$", cache, re.M)
    assert paths == [f"{SITE}/nvidia/{package}/lib/{soname}"], paths
    assert "LD_LIBRARY_PATH" not in host.environment()


def test_no_driver_in_the_image(host, run_ok):
    """libcuda.so.1 must come from the host (the NVIDIA runtime mounts it): a copy in the image
    would shadow it, or mismatch the kernel module."""
    assert "libcuda.so" not in run_ok(host, "ldconfig -p")
    assert run_ok(host, "find / -xdev -name 'libcuda.so*' -not -path '*/stubs/*'") == ""


def test_versions_through_ctypes_without_a_gpu(host, pins, run_ok):
    """cudaRuntimeGetVersion and ncclGetVersion answer without a GPU or driver: 12090 for CUDA
    12.9, 23203 for NCCL 2.32.3."""
    out = run_ok(
        host,
        "python -c 'import ctypes; v = ctypes.c_int(); "
        'ctypes.CDLL("libcudart.so.12").cudaRuntimeGetVersion(ctypes.byref(v)); '
        'print(v.value); ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v)); '
        "print(v.value)'",
    )
    major, minor = map(int, pins["CUDA_VERSION"].split("."))
    n_major, n_minor, n_patch = map(int, pins["NCCL_VERSION"].split("."))
    assert out.split() == [
        str(major * 1000 + minor * 10),
        str(n_major * 10000 + n_minor * 100 + n_patch),
    ]


def test_no_gpu_is_reported_not_crashed(host, run_ok):
    """Without a driver the runtime says so (cudaErrorInsufficientDriver, 35, or
    cudaErrorNoDevice, 100) instead of crashing the process."""
    out = run_ok(
        host,
        "python -c 'import ctypes; n = ctypes.c_int(); "
        'print(ctypes.CDLL("libcudart.so.12").cudaGetDeviceCount(ctypes.byref(n)))\'',
    )
    assert out in ("35", "100"), out


def test_nvidia_container_runtime_environment(inspect, pins):
    env = inspect["Env"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert (env["CUDA_VERSION"], env["NCCL_VERSION"]) == (
        pins["CUDA_VERSION"],
        pins["NCCL_VERSION"],
    )
    labels = inspect["Labels"]
    assert labels["io.horovod.cuda.version"] == pins["CUDA_VERSION"]
    assert labels["io.horovod.nccl.version"] == pins["NCCL_VERSION"]


def test_headers_for_the_engine_build(host):
    """The horovod builder stage compiles the NCCL operations against these (no CUDA toolkit)."""
    assert host.file(f"{SITE}/nvidia/nccl/include/nccl.h").exists
    assert host.file(f"{SITE}/nvidia/cuda_runtime/include/cuda_runtime_api.h").exists
