"""torch and horovod-torch: the flavour's torch build (CPU: CUDA stand-ins; GPU: torch's CUDA 12
build on the cuda layer) imports and trains on the CPU, and horovod.torch reduces across ranks."""

import pytest

SITE = "/opt/venv/lib/python3.11/site-packages"


@pytest.mark.layer("torch")
def test_torch_and_torchvision_versions(host, inspect, torch_pins, run_ok):
    torch, vision = torch_pins
    out = run_ok(
        host,
        "python -c 'import torch, torchvision; "
        'print(torch.__version__.split("+")[0], torchvision.__version__.split("+")[0])\'',
    )
    assert out.split()[-2:] == [torch, vision]
    assert inspect["Env"]["TORCH_VERSION"] == inspect["Labels"]["io.horovod.torch.version"] == torch
    assert inspect["Env"]["TORCHVISION_VERSION"] == vision
    assert inspect["Labels"]["io.horovod.torchvision.version"] == vision


@pytest.mark.layer("torch")
def test_torch_trains_on_the_cpu_without_a_gpu(host, run_ok):
    """A torchvision ResNet-18 forward and backward; no GPU here, so is_available() is False
    (on the CPU flavour because the stand-in cudaGetDeviceCount says "no device")."""
    out = run_ok(
        host,
        "python -c 'import torch, torchvision; m = torchvision.models.resnet18(num_classes=4); "
        "loss = m(torch.randn(2, 3, 32, 32)).sum(); loss.backward(); "
        "print(torch.cuda.is_available(), m.fc.weight.grad.abs().sum().item() > 0)'",
    )
    assert out.split()[-2:] == ["False", "True"]


@pytest.mark.layer("torch")
def test_pip_check_accepts_only_torchs_cuda_requirements(host, run_ok, flavour):
    """The accepted lines are torch's CUDA requirements, each one named (cpu: every one of them,
    not installed; gpu: the cuda layer's CUDA 12.9 wheels instead of torch's 12.8 pins)."""
    accepted = host.file("/etc/pip-check.d/torch").content_string.splitlines()
    assert accepted
    for line in accepted:
        assert line.startswith("torch "), line
        name = line.split(" requires " if " requires " in line else " has requirement ")[1]
        assert name.startswith(("nvidia-", "cuda-", "triton")), line
        if flavour == "gpu":  # the chain's 12.9 wheels for torch's 12.8 pins, or not used at all
            assert "-cu12" in name or name.startswith(("cuda-", "triton")), line
    out = run_ok(host, "pip-check")
    assert all(f"accepted: {line}" in out for line in accepted), out


@pytest.mark.layer("torch")
@pytest.mark.flavour("cpu")
def test_cpu_standins_fill_every_cuda_soname(host, run_ok):
    """Every library torch links resolves, the CUDA ones to stand-ins in torch/lib, and no CUDA
    wheel is installed (the layer's point: about 1.4 GB instead of 4.5)."""
    for lib in ("libtorch_cuda.so", "libtorch_cpu.so", "libtorch_python.so"):
        ldd = run_ok(host, f"ldd {SITE}/torch/lib/{lib}")
        assert "not found" not in ldd, ldd
    cudart = run_ok(host, f"ls {SITE}/torch/lib/ | grep '^libcudart\\.so\\.'")
    assert "is a CPU stand-in" in host.file(f"{SITE}/torch/lib/{cudart}").content.decode("latin-1")
    assert not host.file(f"{SITE}/nvidia").exists
    assert not host.exists("gcc")  # compiled in the builder stage only


@pytest.mark.layer("torch")
@pytest.mark.flavour("gpu")
def test_gpu_torch_uses_the_chains_cuda_and_nccl(host, run_ok, pins):
    """torch's CUDA 12 build loads the cuda layer's CUDA runtime and NCCL (one NCCL per process,
    the engine's), and says CUDA 12. torch.cuda.nccl.version() is the NCCL torch was compiled
    with (2.27.5); the library loaded is asked through ctypes, in the same process."""
    ldd = run_ok(host, f"ldd {SITE}/torch/lib/libtorch_cuda.so")
    assert "not found" not in ldd, ldd
    for soname, package in (("libnccl.so.2", "nccl"), ("libcudart.so.12", "cuda_runtime")):
        line = next(x for x in ldd.splitlines() if x.strip().startswith(soname))
        assert f"/nvidia/{package}/lib/" in line, line
    out = run_ok(
        host,
        "python -c 'import ctypes, torch; v = ctypes.c_int(); "
        'ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v)); '
        "print(torch.version.cuda, v.value // 10000, v.value // 100 % 100, v.value % 100)'",
    )
    cuda, *parts = out.split()[-4:]
    nccl = ".".join(parts)
    assert cuda.startswith("12."), out
    assert nccl == pins["NCCL_VERSION"], out


@pytest.mark.layer("horovod-torch")
def test_torch_allreduce_across_two_ranks(host, run_ok):
    """horovod.torch over the engine in the image, torch tensors in and out; bfloat16 too, which
    needs no ml_dtypes (the image has none: issue 54)."""
    code = (
        "import torch, horovod.torch as hvd; hvd.init(); "
        "t = hvd.allreduce(torch.full((3,), float(hvd.rank() + 1)), op=hvd.Sum); "
        "g = hvd.allgather(torch.tensor([hvd.rank()])); "
        "b = hvd.allreduce(torch.full((2,), 1.5, dtype=torch.bfloat16), op=hvd.Sum); "
        "print('SUM', t.tolist(), g.tolist(), b.dtype, b.tolist())"
    )
    out = run_ok(host, f'horovodrun -np 2 python -c "{code}"')
    assert out.count("SUM [3.0, 3.0, 3.0] [0, 1] torch.bfloat16 [3.0, 3.0]") == 2, out


@pytest.mark.layer("horovod-torch")
def test_torch_example_trains_in_sync(host, run_ok):
    out = run_ok(
        host, "horovodrun -np 2 python /opt/horovod/examples/pytorch_classifier.py --epochs 2"
    )
    assert "Ranks: 2" in out and "(all ranks' weights identical)" in out, out
