"""Adasum (op=hvd.Adasum) under real mpirun: against the NumPy reference of its tree on 2 and 4
ranks (float16/bfloat16/float32/float64, sizes the rank count does not divide, 1 element, fused
tensors each combined on its own, a joined rank's zeros), its refusals on every rank, and 3 ranks
refused by name."""

import pytest

from tests.support.fixtures import per_world
from tests.support.mpi import ENGINE

SCENARIOS = ["adasum", "adasum_fused", "adasum_scaled", "adasum_refused", "adasum_join"]


@per_world(2, 4)
def batch(request):
    """One launch per rank count runs every scenario (each test checks its own)."""
    return ENGINE.run_batch(request.param, SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_adasum(batch, scenario):
    batch.check(scenario)


def test_adasum_unfused():
    """Fusion off: every tensor its own response, the same answers."""
    ENGINE.run_ok(2, "adasum_fused", env={"HOROVOD_FUSION_THRESHOLD": "0"})


def test_adasum_needs_a_power_of_two():
    ENGINE.run_ok(3, "adasum_not_power_of_two")
