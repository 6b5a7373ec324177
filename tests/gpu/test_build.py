"""The GPU build on any machine: it links the pinned NCCL and CUDA runtime, reports them, keeps
every CPU collective working, and refuses GPU work with a clear error when no GPU is visible."""
import re
import subprocess
import sys

import pytest

from conftest import MPIRUN, ROOT, pins, python, run

PINS = pins()


def version_code(v, major_scale=1000, minor_scale=10):  # "12.9" -> 12090
    parts = [int(x) for x in v.split(".")]
    return parts[0] * major_scale + parts[1] * minor_scale


def test_engine_links_pinned_nccl_and_cudart(site):
    ldd = subprocess.run(["ldd", str(site / "horovod" / "libhorovod_core.so")], capture_output=True, text=True)
    libs = dict(re.findall(r"^\s*(\S+) => (.*)$", ldd.stdout, re.M))
    assert "not found" not in ldd.stdout, ldd.stdout
    assert "nvidia/nccl/lib/libnccl.so.2" in libs.get("libnccl.so.2", ""), ldd.stdout
    assert "nvidia/cuda_runtime/lib/libcudart.so.12" in libs.get("libcudart.so.12", ""), ldd.stdout


def test_build_info_reports_linked_versions(site):
    p = python("import horovod.tensorflow as hvd, horovod.common.basics as b\n"
               "i = b.build_info(); print(hvd.nccl_built(), hvd.cuda_built(), i['cuda_runtime_version'], i['gpu_operations'])")
    assert p.returncode == 0, p.stderr
    major, minor, patch = (int(x) for x in PINS["NCCL_VERSION"].split("."))
    want = f"{major * 10000 + minor * 100 + patch} True {version_code(PINS['CUDA_VERSION'])} NCCL"
    assert p.stdout.split("\n")[-2] == want


def test_check_build_shows_nccl(site):
    p = python("import sys; from horovod.runner.launch import main; sys.argv = ['horovodrun', '--check-build']; main()")
    assert p.returncode == 0, p.stderr
    row = [line for line in p.stdout.splitlines() if "NCCL" in line]
    assert row and PINS["NCCL_VERSION"] in row[0] and "[X]" in row[0], p.stdout


def test_tensorflow_ops_have_gpu_kernels(site):
    p = python("import horovod.tensorflow\n"
               "from tensorflow.python.framework import kernels\n"
               "for op in ('HorovodAllreduce', 'HorovodAllgather', 'HorovodBroadcast', 'HorovodAlltoall', 'HorovodReducescatter'):\n"
               "    print(op, sorted({k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}))")
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith("Horovod")]
    assert len(lines) == 5 and all(line.endswith("['CPU', 'GPU']") for line in lines), p.stdout


@pytest.mark.parametrize("np_", [2, 3])
def test_cpu_selftest_passes_in_gpu_build(site, np_):
    p = run(MPIRUN + ["-np", str(np_), sys.executable, "-m", "horovod.selftest"], timeout=180)
    assert p.returncode == 0 and "all checks passed" in p.stdout, p.stdout + p.stderr


def test_gpu_selftest_without_gpu_fails_clearly_on_every_rank(site, gpu_count):
    if gpu_count[0]:
        pytest.skip(f"{gpu_count[0]} GPU(s) visible: the no-GPU error cannot happen here")
    p = run(MPIRUN + ["-np", "2", sys.executable, "-m", "horovod.selftest", "--gpu"], timeout=60)
    assert p.returncode != 0
    assert p.stderr.count("no GPU visible on host") == 2, p.stderr
    assert "--gpus all" in p.stderr


@pytest.mark.parametrize("np_", [2, 3])
def test_gpu_tensor_is_refused_by_name_on_every_rank(site, gpu_count, np_):
    """Host memory enqueued as a GPU tensor: each rank's reason reaches every rank, and the job
    goes on (tests/engine/scenarios.py gpu_claim)."""
    reason = "is not in GPU 0's memory" if gpu_count[0] else "no GPU visible on host"
    p = run(MPIRUN + ["-np", str(np_), sys.executable, str(ROOT / "tests" / "engine" / "scenarios.py"),
                      "gpu_claim", reason], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert all(f"OK gpu_claim rank={q}" in p.stdout for q in range(np_)), p.stdout + p.stderr
