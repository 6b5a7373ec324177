"""GPU-build tests: the engine compiled with HOROVOD_GPU_OPERATIONS=NCCL (`make build/engine-gpu`
puts it in build/gpu/site; HOROVOD_TEST_SITE points here). The build checks run everywhere; the
NCCL collectives run only where a GPU is visible and are skipped, saying why, elsewhere. Every
launch has a hard timeout, so a hang fails the test instead of stalling CI.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("HOROVOD_TEST_SITE", ROOT / "build" / "gpu" / "site"))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2",
       "OMP_NUM_THREADS": "1"}


def pins():
    out = {}
    for line in (ROOT / "versions.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def run(cmd, timeout=120, env=None):
    """Runs cmd from SITE (so `import horovod` finds the GPU build, not the source tree)."""
    e = dict(os.environ, PYTHONPATH=str(SITE), **ENV)
    e.update(env or {})
    try:
        return subprocess.run(cmd, cwd=SITE, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as ex:
        pytest.fail(f"{cmd} hung for more than {timeout} s:\n{ex.stdout}\n{ex.stderr}")


def python(code, timeout=120):
    return run([sys.executable, "-c", code], timeout=timeout)


@pytest.fixture(scope="session")
def site():
    if not (SITE / "horovod" / "libhorovod_core.so").exists():
        pytest.fail(f"no GPU build in {SITE}: run `make build/engine-gpu`")
    return SITE


@pytest.fixture(scope="session")
def gpu_count(site):
    """(number of visible GPUs, the engine's reason if none)."""
    p = python("from horovod import _core\ntry: print(_core.gpu_device_count())\n"
               "except Exception as e: print(0); print(e)")
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines, p.stderr
    return int(lines[0]), "\n".join(lines[1:])
