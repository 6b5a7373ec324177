"""The GPU build on any machine: it links the pinned NCCL and CUDA runtime, reports them, keeps
every CPU collective working, and refuses GPU work with a clear error when no GPU is visible."""

import re
import subprocess

import pytest

from tests.support import mpi
from tests.support.mpi import ENGINE
from tests.support.paths import pins

PINS = pins()


def version_code(v, major_scale=1000, minor_scale=10):  # "12.9" -> 12090
    parts = [int(x) for x in v.split(".")]
    return parts[0] * major_scale + parts[1] * minor_scale


def test_engine_links_pinned_nccl_and_cudart(site):
    ldd = subprocess.run(
        ["ldd", str(site / "horovod" / "libhorovod_core.so")], capture_output=True, text=True
    )
    libs = dict(re.findall(r"^\s*(\S+) => (.*)$", ldd.stdout, re.M))
    assert "not found" not in ldd.stdout, ldd.stdout
    assert "nvidia/nccl/lib/libnccl.so.2" in libs.get("libnccl.so.2", ""), ldd.stdout
    assert "nvidia/cuda_runtime/lib/libcudart.so.12" in libs.get("libcudart.so.12", ""), ldd.stdout


def test_build_info_reports_linked_versions(site):
    p = mpi.python(
        "import horovod.tensorflow as hvd, horovod.common.basics as b\n"
        "i = b.build_info(); print(hvd.nccl_built(), hvd.cuda_built(), "
        "i['cuda_runtime_version'], i['gpu_operations'])",
        site=site,
        tf=True,
    )
    assert p.returncode == 0, p.stderr
    major, minor, patch = (int(x) for x in PINS["NCCL_VERSION"].split("."))
    want = f"{major * 10000 + minor * 100 + patch} True {version_code(PINS['CUDA_VERSION'])} NCCL"
    assert p.stdout.split("\n")[-2] == want


def test_check_build_shows_nccl(site):
    p = mpi.python(
        "import sys; from horovod.runner.launch import main; "
        "sys.argv = ['horovodrun', '--check-build']; main()",
        site=site,
        tf=True,
    )
    assert p.returncode == 0, p.stderr
    row = [line for line in p.stdout.splitlines() if "NCCL" in line]
    assert row and PINS["NCCL_VERSION"] in row[0] and "[X]" in row[0], p.stdout


def test_tensorflow_ops_have_gpu_kernels(site):
    p = mpi.python(
        "import horovod.tensorflow\n"
        "from tensorflow.python.framework import kernels\n"
        "for op in ('HorovodAllreduce', 'HorovodAllgather', 'HorovodBroadcast', "
        "'HorovodAlltoall', 'HorovodReducescatter'):\n"
        "    print(op, sorted({k.device_type for k in "
        "kernels.get_registered_kernels_for_op(op).kernel}))",
        site=site,
        tf=True,
    )
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith("Horovod")]
    assert len(lines) == 5 and all(line.endswith("['CPU', 'GPU']") for line in lines), p.stdout


@pytest.mark.parametrize("np_", [2, 3])
def test_cpu_selftest_passes_in_gpu_build(site, np_):
    rc, out, err = mpi.launch(np_, "-m", "horovod.selftest", site=site, tf=True, timeout=180)
    assert rc == 0 and "all checks passed" in out, out + err


def test_gpu_selftest_without_gpu_fails_clearly_on_every_rank(site, gpu_count):
    if gpu_count[0]:
        pytest.skip(f"{gpu_count[0]} GPU(s) visible: the no-GPU error cannot happen here")
    rc, out, err = mpi.launch(2, "-m", "horovod.selftest", "--gpu", site=site, tf=True, timeout=60)
    assert rc != 0
    assert err.count("no GPU visible on host") == 2, err
    assert "--gpus all" in err


@pytest.mark.parametrize("np_", [2, 3])
def test_gpu_tensor_is_refused_by_name_on_every_rank(site, gpu_count, np_):
    """Host memory enqueued as a GPU tensor: each rank's reason reaches every rank, and the job
    goes on (gpu_claim in tests/engine/scenarios_errors.py)."""
    reason = "is not in GPU 0's memory" if gpu_count[0] else "no GPU visible on host"
    rc, out, err = ENGINE.launch(np_, "gpu_claim", reason, site=site, tf=True, timeout=120)
    assert rc == 0, out + err
    assert all(f"OK gpu_claim rank={q}" in out for q in range(np_)), out + err


# ---- the NCCL loaded at run time, behind a fake version ----------------------------------------
# A stand-in library that defines only ncclGetVersion, preloaded ahead of the real libnccl: the
# engine then sees that version as the loaded one, as when another package's older NCCL is found
# first on the library path (torch 2.10's wheel brings 2.27.5). Everything else is the real NCCL.
FAKE_NCCL = "int ncclGetVersion(int* version) { *version = %d; return 0; }\n"
DEFECTIVE, FIXED = 22705, 23203  # 2.27.5: NVIDIA/nccl#1950 (one-rank ncclAvg); 2.32.3: none


@pytest.fixture(scope="module")
def fake_nccl(tmp_path_factory):
    def make(code):
        d = tmp_path_factory.mktemp(f"nccl{code}")
        (d / "version.c").write_text(FAKE_NCCL % code)
        lib = d / "libfakenccl.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(d / "version.c")], check=True)
        return {"LD_PRELOAD": str(lib)}

    return make


def _check_build(site, env):
    p = mpi.python(
        "import sys; from horovod.runner.launch import main; "
        "sys.argv = ['horovodrun', '--check-build']; main()",
        site=site,
        tf=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def _build_info(site, env):
    p = mpi.python(
        "from horovod import _core; i = _core.build_info(); "
        "print(i['nccl_built'], 'nccl_defects' in i, len(i.get('nccl_defects', [])))",
        site=site,
        tf=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    code, has_key, count = p.stdout.split()[-3:]
    return int(code), has_key == "True", int(count)


def test_build_info_reports_the_nccl_loaded_not_the_headers(site, fake_nccl):
    code, _, _ = _build_info(site, fake_nccl(DEFECTIVE))
    assert code == DEFECTIVE
    row = [ln for ln in _check_build(site, fake_nccl(DEFECTIVE)).splitlines() if "NCCL" in ln]
    assert row and "2.27.5 (the library loaded at run time)" in row[0], row


def test_check_build_warns_when_the_loaded_nccl_has_known_defects(site, fake_nccl):
    _, has_key, count = _build_info(site, fake_nccl(DEFECTIVE))
    if not has_key:
        pytest.skip(
            "build_info() has no nccl_defects: csrc/python/module.cc's BuildInfo needs "
            'd["nccl_defects"] = NcclDefectNotes(info.nccl_version); (common/nccl_defects.h)'
        )
    assert count == 1
    out = _check_build(site, fake_nccl(DEFECTIVE))
    assert "WARNING: 1 known defect(s)" in out and "NVIDIA/nccl#1950" in out, out
    assert "one-rank reductions never call NCCL" in out, out
    out = _check_build(site, fake_nccl(FIXED))
    assert "WARNING" not in out and "NCCL defect" not in out, out
    assert _build_info(site, fake_nccl(FIXED))[2] == 0


def test_init_logs_the_loaded_nccl_and_its_defects(site, fake_nccl):
    env = {**fake_nccl(DEFECTIVE), "HOROVOD_LOG_LEVEL": "info"}
    code = "import horovod.numpy as hvd; hvd.init(); hvd.shutdown()"
    rc, out, err = mpi.launch(1, "-c", code, site=site, tf=True, env=env, timeout=60)
    assert rc == 0, out + err
    if "NCCL 2.27.5 loaded" not in err:
        pytest.skip(
            "hvd.init() does not log the NCCL it loaded yet: Init (csrc/engine/engine.cc) needs "
            "LogGpuLibraries(); after SetLogRank (engine/gpu_context.h)"
        )
    assert "NVIDIA/nccl#1950" in err, err
    rc, out, err = mpi.launch(
        1, "-c", code, site=site, tf=True, env={**fake_nccl(FIXED), "HOROVOD_LOG_LEVEL": "info"}
    )
    assert rc == 0 and "NCCL 2.32.3 loaded" in err and "NVIDIA/nccl#1950" not in err, err
