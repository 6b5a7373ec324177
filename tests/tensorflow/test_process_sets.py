"""Process sets in horovod.tensorflow under real mpirun (np 2 and 3): every op eagerly and in a
tf.function within each of two sets at once, gradients within a set, a rank outside refused,
training with the tape, the Keras DistributedOptimizer and broadcast_variables per set, and an
upstream-style program (issue 21). The engine's own process-set tests are in tests/engine."""

import pytest

from tests.support.fixtures import per_world
from tests.support.mpi import TF_OPS

NAMES = ["process_sets", "process_sets_training", "process_sets_upstream"]


@per_world(2, 3)
def batch(request):
    return TF_OPS.run_batch(request.param, NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_process_sets(batch, name):
    batch.check(name)
