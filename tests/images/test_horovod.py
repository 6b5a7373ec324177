"""horovod and horovod-torch: our package, built in the builder stage, works under mpirun in the
runtime image (GPU flavour: built with NCCL, checked as far as a machine without a GPU allows).
The checks here hold for both frameworks; the TensorFlow ones skip on torch, and the torch ones
are in test_torch.py."""

import os
import re

import pytest
import requests

pytestmark = pytest.mark.layer("horovod", "horovod-torch")

CORE = "/opt/venv/lib/python3.11/site-packages/horovod/libhorovod_core.so"


def test_check_build(host, pins, run_ok, flavour, framework, torch_pins):
    out = run_ok(host, "horovodrun --check-build")
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert pins["HOROVOD_VERSION"] in rows["Horovod"]
    assert re.search(r"\[X\]\s+Open MPI v" + re.escape(pins["OPENMPI_VERSION"]), rows["MPI"])
    assert "[X]" in rows["Gloo"] and "TCP transport" in rows["Gloo"]
    assert re.search(r"\s+mpi \(what hvd.init\(\) chooses here\)", rows["Transport"])
    if flavour == "gpu":
        # The pinned NCCL, as loaded at run time, and no known defect of it (issue 55).
        nccl = rf"\[X\]\s+{re.escape(pins['NCCL_VERSION'])} \(the library loaded at run time\)$"
        assert re.search(nccl, rows["NCCL"]), rows["NCCL"]
    else:
        assert "[ ]" in rows["NCCL"]
    tf_version = pins["TENSORFLOW_VERSION"]
    if framework == "tensorflow":
        assert re.search(
            rf"\[X\]\s+{re.escape(tf_version)} \(frontend built against {re.escape(tf_version)}\)$",
            rows["TensorFlow"],
        ), rows["TensorFlow"]
        assert "[ ]" in rows["PyTorch"] and "not installed" in rows["PyTorch"]
    else:
        assert "[ ]" in rows["TensorFlow"] and "not installed" in rows["TensorFlow"]
        assert re.search(
            r"\[X\]\s+" + re.escape(torch_pins[0]) + r" \(horovod.torch", rows["PyTorch"]
        ), rows["PyTorch"]
    assert f"{pins['MPI4PY_VERSION']} installed" in rows["mpi4py"]
    # The image's ENV pins, echoed by check-build, agree with versions.env.
    expected = {k: pins[k] for k in ("HOROVOD_VERSION", "OPENMPI_VERSION", "PYTHON_VERSION")}
    if framework == "tensorflow":
        expected["TENSORFLOW_VERSION"] = tf_version
    else:
        expected["TORCH_VERSION"], expected["TORCHVISION_VERSION"] = torch_pins
    if flavour == "gpu":
        expected.update(CUDA_VERSION=pins["CUDA_VERSION"], NCCL_VERSION=pins["NCCL_VERSION"])
    for key, value in expected.items():
        assert f"{key}={value}" in rows["image pins"]


def test_engine_libraries_resolve(host, run_ok, flavour):
    """Every library of the engine is found; the GPU build links NCCL and the CUDA runtime from
    the cuda layer's wheels, the CPU build neither."""
    ldd = run_ok(host, f"ldd {CORE}")
    assert "not found" not in ldd, ldd
    # normpath: the engine's RUNPATH is $ORIGIN/../nvidia/<lib>/lib
    linked = {
        line.split()[0]: os.path.normpath(line.split()[2])
        for line in ldd.splitlines()
        if " => " in line
    }
    gpu_libs = {"libnccl.so.2": "nccl", "libcudart.so.12": "cuda_runtime"}
    if flavour == "gpu":
        for soname, package in gpu_libs.items():
            assert linked.get(soname, "").startswith(
                f"/opt/venv/lib/python3.11/site-packages/nvidia/{package}/lib/"
            ), ldd
    else:
        assert not set(gpu_libs) & set(linked), ldd


def test_selftest_as_documented(client, ref):
    """`docker run --rm horovod:latest mpirun -np 2 python -m horovod.selftest`"""
    # containers.run raises ContainerError (with the output) on a non-zero exit.
    client.containers.run(
        ref, ["mpirun", "-np", "2", "python", "-m", "horovod.selftest"], remove=True
    )


def test_no_command_prints_the_banner(client, ref, pins, flavour, framework, torch_pins):
    """`docker run --rm horovod:latest` (no command, no terminal): the banner, exit 0."""
    out = client.containers.run(ref, remove=True).decode()
    first = out.splitlines()[0]
    assert first.startswith(f"== Horovod {pins['HOROVOD_VERSION']} ({flavour}"), out
    if framework == "tensorflow":
        assert f"TensorFlow {pins['TENSORFLOW_VERSION']}, Open MPI {pins['OPENMPI_VERSION']}" in out
    else:
        torch, vision = torch_pins
        assert f"PyTorch {torch}, torchvision {vision}, Open MPI {pins['OPENMPI_VERSION']}" in out
    assert "mpirun -np 2 python -m horovod.selftest" in out and "kubernetes.md" in out
    if flavour == "gpu":
        assert f"CUDA {pins['CUDA_VERSION']}, NCCL {pins['NCCL_VERSION']}" in first, out


SINGLE_COPY_JOB = """
import numpy as np
import horovod.numpy as hvd
hvd.init()
x = hvd.allreduce(np.full(1 << 20, hvd.rank() + 1.0, np.float32), op=hvd.Sum, name="x")
assert (x == 3).all(), x[:4]
"""


@pytest.mark.parametrize("cap", [None, "SYS_PTRACE"])
def test_tcp_ranks_of_one_container_copy_once_where_seccomp_allows(client, ref, cap):
    """Two ranks of one container over the TCP transport (`horovodrun --gloo`, no mpirun). Docker's
    default seccomp profile allows process_vm_readv only with CAP_SYS_PTRACE: without it the
    ranks' probe fails and large messages take their Unix socket (as Open MPI's shared memory,
    whose single copy this image turns off); with `--cap-add SYS_PTRACE` they are copied once.
    The allreduce is right either way."""
    out = client.containers.run(
        ref,
        ["horovodrun", "--gloo", "-np", "2", "python", "-c", SINGLE_COPY_JOB],
        environment={"HOROVOD_LOG_LEVEL": "debug"},
        cap_add=[cap] if cap else None,
        stderr=True,
        remove=True,
    ).decode()
    copies = 1 if cap else 0
    for r in range(2):
        line = f"rank {r}: 1 of 1 links over Unix sockets (peers on this machine), {copies} with"
        assert line in out, out


def test_selftest_through_horovodrun_as_mpiuser(user_host, run_ok):
    run_ok(user_host, "horovodrun -np 2 python -m horovod.selftest")


def test_the_builders_tree_of_its_framework(host, framework):
    """One builder compiles both frameworks' trees (images/horovod/builder.Dockerfile): each
    image got its own, the TensorFlow ops (and their version stamp) only where TensorFlow is."""
    ops = os.path.dirname(CORE) + "/tensorflow/mpi_lib"
    for path in (ops + ".so", ops + ".tf_version"):
        assert host.file(path).exists == (framework == "tensorflow"), path


def test_tensorflow_ops_across_two_ranks(host, run_ok, framework):
    """The TF ops compiled in the builder load in the runtime and reduce across ranks, on the
    same engine as the NumPy frontend."""
    if framework != "tensorflow":
        pytest.skip("no TensorFlow in the torch images")
    code = (
        "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'; import tensorflow as tf; "
        "import horovod.tensorflow as hvd, horovod.numpy as hnp; hvd.init(); "
        "t = hvd.allreduce(tf.fill([3], float(hvd.rank() + 1)), op=hvd.Sum); "
        "a = hnp.allreduce(__import__('numpy').ones(3), op=hnp.Sum); "
        "print('SUM', t.numpy().tolist(), a.tolist())"
    )
    out = run_ok(host, f'horovodrun -np 2 python -c "{code}"')
    assert out.count("SUM [3.0, 3.0, 3.0] [2.0, 2.0, 2.0]") == 2, out


def test_horovodrun_propagates_failure(host):
    cmd = (
        "horovodrun -np 2 python -c "
        "'import os, sys; sys.exit(int(os.environ[\"OMPI_COMM_WORLD_RANK\"]) + 4)'"
    )
    assert host.run(cmd).rc in (4, 5)


def test_runtime_has_no_build_tools(host):
    for tool in ("g++", "cmake", "ninja"):
        assert not host.exists(tool), tool
    assert not host.file("/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h").exists
    assert not host.file("/src").exists


def test_examples_included(host):
    assert host.file("/opt/horovod/examples").is_directory
    assert host.file("/opt/horovod/examples").listdir()


@pytest.mark.flavour("gpu")
def test_gpu_selftest_says_no_gpu(containers, ref):
    """`python -m horovod.selftest --gpu` on a machine without a GPU fails fast and says why
    (no hang in NCCL or CUDA initialization)."""
    c = containers.start(ref, ["python", "-m", "horovod.selftest", "--gpu"])
    try:
        rc = c.wait(timeout=60)["StatusCode"]
    except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
        pytest.fail("selftest --gpu still running after 60 s:\n" + c.logs().decode())
    out = c.logs().decode()
    assert rc != 0, out
    assert "no GPU visible" in out, out
