"""Device arrays in the CPU build (horovod/common/device.py): CuPy-like and torch-like
stand-ins (tests/gpu/fakelib.py) reach the engine, which refuses them on every rank, naming the
tensor and saying the build has no GPU operations; the job goes on."""

import pytest

from tests.support import mpi
from tests.support.paths import ROOT

CHECKS = mpi.Program(ROOT / "tests" / "gpu" / "device_checks.py", timeout=180)


@pytest.mark.parametrize("np_", [2, 3])
def test_device_arrays_refused_on_every_rank_in_cpu_build(np_):
    CHECKS.run_ok(np_, "refused", "this build of Horovod has no GPU operations")
    CHECKS.run_ok(np_, "local_refusals")
