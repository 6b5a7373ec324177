"""Every NCCL collective on GPU tensors against NumPy references (horovod/tensorflow/gpu_checks.py),
one GPU per rank. Needs a visible GPU: skipped, with the engine's reason, everywhere else. No
machine this project is built on has a GPU, so these have never run here."""
import sys

import pytest

from conftest import MPIRUN, run


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_nccl_collectives_match_numpy(site, gpu_count, np_):
    count, why = gpu_count
    if count == 0:
        pytest.skip(f"no GPU visible: {why}")
    if count < np_:
        pytest.skip(f"{np_} ranks need {np_} GPUs (NCCL wants one device per rank); {count} visible")
    p = run(MPIRUN + ["-np", str(np_), sys.executable, "-m", "horovod.selftest", "--gpu"], timeout=300)
    assert p.returncode == 0 and "all checks passed" in p.stdout, p.stdout + p.stderr
    assert "FAIL" not in p.stdout
