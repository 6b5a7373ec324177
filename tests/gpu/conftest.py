"""GPU-build tests: the engine compiled with HOROVOD_GPU_OPERATIONS=NCCL (`make build/engine-gpu`
puts it in build/gpu/site; HOROVOD_TEST_SITE points here). The build checks run everywhere; the
NCCL collectives run only where a GPU is visible and are skipped, saying why, elsewhere. Every
process runs from the GPU build's copy (tests/support/mpi.py, site=GPU_SITE), so `import horovod`
finds it and not the source tree, and has a hard timeout: a hang fails the test.
"""

import pytest

from tests.support import mpi
from tests.support.paths import GPU_SITE


@pytest.fixture(scope="session")
def site():
    if not (GPU_SITE / "horovod" / "libhorovod_core.so").exists():
        pytest.fail(f"no GPU build in {GPU_SITE}: run `make build/engine-gpu`")
    return GPU_SITE


@pytest.fixture(scope="session")
def gpu_count(site):
    """(number of visible GPUs, the engine's reason if none)."""
    p = mpi.python(
        "from horovod import _core\ntry: print(_core.gpu_device_count())\n"
        "except Exception as e: print(0); print(e)",
        site=site,
        tf=True,
    )
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines, p.stderr
    return int(lines[0]), "\n".join(lines[1:])
