"""Device arrays (CuPy arrays, torch CUDA tensors) through horovod.numpy, in the GPU build
(build/gpu/site): the checks of tests/gpu/device_checks.py, which scripts/gpu_check.sh runs too.
Without a GPU, CuPy-like and torch-like stand-ins reach the engine's "no GPU visible" refusal on
every rank; the NCCL runs are skipped, saying why. No machine this project is built on has a
GPU, so those have never run here."""

import os
import re
import subprocess
import sys

import pytest

from tests.support import mpi
from tests.support.paths import ROOT

CHECKS = mpi.Program(ROOT / "tests" / "gpu" / "device_checks.py", timeout=180)
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _device_lib():
    """(library the checks would use, its GPU count), or (None, 0): CuPy or torch, as the
    checks and the script choose."""
    p = mpi.python(
        "import os\nfor n in ('cupy', 'torch'):\n"
        "    try:\n        m = __import__(n)\n    except ImportError:\n        continue\n"
        "    c = m.cuda.runtime.getDeviceCount() if n == 'cupy' else m.cuda.device_count()\n"
        "    print(n, c); break\nelse:\n    print('none 0')"
    )
    name, count = p.stdout.split()[-2:]
    return (None if name == "none" else name), int(count)


def _need_gpus(gpu_count, n):
    count, why = gpu_count
    if count == 0:
        pytest.skip(f"no GPU visible: {why}")
    if count < n:
        pytest.skip(f"{n} ranks need {n} GPUs (NCCL wants one device per rank); {count} visible")
    lib, _ = _device_lib()
    if lib is None:
        pytest.skip("neither CuPy nor torch is importable: no device arrays to hand over")


@pytest.mark.parametrize("np_", [2, 3])
def test_device_arrays_refused_on_every_rank_without_gpu(site, gpu_count, np_):
    if gpu_count[0]:
        pytest.skip(f"{gpu_count[0]} GPU(s) visible: the no-GPU refusal cannot happen here")
    CHECKS.run_ok(np_, "refused", "no GPU visible on host", site=site)


@pytest.mark.parametrize("np_", [2, 3])
def test_frontend_refusals_reach_every_rank(site, np_):
    CHECKS.run_ok(np_, "local_refusals", site=site)


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_nccl_collectives_on_device_arrays_match_numpy(site, gpu_count, np_):
    _need_gpus(gpu_count, np_)
    out, _ = CHECKS.run_ok(np_, "collectives", site=site, timeout=300)
    assert "PASS alltoall uneven" in out


@pytest.mark.parametrize("np_", [1, 3])
def test_odd_count_checks_hold_on_host_arrays(site, np_):
    """The odd-count checks (tests/gpu/odd_counts.py: every collective and dtype at 1, 31, 4913
    and 2^20 + 7 elements) on host arrays, HVD_DEVICE_LIB=numpy: their expectations are the CPU
    path's results, at one rank and at several. On a GPU `collectives` runs them on the device."""
    out, _ = CHECKS.run_ok(
        np_, "odd_counts", site=site, env={"HVD_DEVICE_LIB": "numpy"}, timeout=300
    )
    for what in (
        "allreduce avg float32 n=4913",
        "allreduce scaled int8 n=1048583",
        "reducescatter avg float64 n=31",
        "alltoall uint8 n=1",
        "allgather int64 n=4913",
    ):
        assert f"PASS {what} rank=0" in out, what
    if "bfloat16 skipped" not in out:
        assert "PASS allreduce avg bfloat16 n=4913 rank=0" in out


def test_stall_of_a_device_op_is_named(site, gpu_count):
    _need_gpus(gpu_count, 2)
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    _, out, err = CHECKS.launch(2, "stall", site=site, env=env, timeout=120)
    assert "GOT STALL ERROR rank=0" in out, out + err


def test_gpu_check_script_without_gpu_exits_0_saying_so():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "gpu_check: no GPU visible" in p.stdout and "nothing to check" in p.stdout


def test_gpu_check_script_dry_run_on_host_arrays():
    """The whole script without a GPU (HVD_DEVICE_LIB=numpy): its TensorFlow-free NCCL build,
    the collectives, the stall check and the bench (MPI standing in for NCCL) on host arrays,
    down to its summary line."""
    env = {
        **os.environ,
        "HVD_DEVICE_LIB": "numpy",
        "HVD_BENCH_MAX_BYTES": str(1 << 20),
        "PYTHON": sys.executable,
    }
    p = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"engine built with \S+: NCCL 2", p.stdout), p.stdout
    summary = [ln for ln in p.stdout.splitlines() if ln.startswith("gpu_check: SUMMARY numpy np=2")]
    assert summary and "stall named error on rank 0" in summary[0], p.stdout
    assert "checks passed on 2 rank(s)" in summary[0] and "ratio" in summary[0], p.stdout
