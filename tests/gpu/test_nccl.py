"""Every NCCL collective on GPU tensors against NumPy references (horovod/tensorflow/gpu_checks.py),
one GPU per rank. Needs a visible GPU: skipped, with the engine's reason, everywhere else. No
machine this project is built on has a GPU, so these have never run here."""

import pytest

from tests.support import mpi


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_nccl_collectives_match_numpy(site, gpu_count, np_):
    count, why = gpu_count
    if count == 0:
        pytest.skip(f"no GPU visible: {why}")
    if count < np_:
        pytest.skip(
            f"{np_} ranks need {np_} GPUs (NCCL wants one device per rank); {count} visible"
        )
    rc, out, err = mpi.launch(
        np_, "-m", "horovod.selftest", "--gpu", site=site, tf=True, timeout=300
    )
    assert rc == 0 and "all checks passed" in out, out + err
    assert "FAIL" not in out
