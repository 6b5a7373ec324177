"""op=hvd.Adasum in horovod.tensorflow under real mpirun (scenarios_ops_adasum.py): on 2 and 4
ranks against the NumPy reference of the tree, eager and tf.function; DistributedGradientTape
training; the tf.compat.v1 delta optimizer; refusals on every rank; 3 ranks refused by name."""

import pytest

from tests.support.fixtures import per_world
from tests.support.mpi import TF_OPS

SCENARIOS = ["adasum", "adasum_refused", "adasum_tape"]


@per_world(2, 4)
def batch(request):
    """One launch per rank count (TF's import costs seconds per rank)."""
    return TF_OPS.run_batch(request.param, SCENARIOS)


def test_allreduce_eager_and_in_a_function(batch):
    """float16/bfloat16/float32/float64, 1 element to 1001, named and unnamed; a tf.function
    with several Adasum ops and a grouped one (fused, each tensor combined on its own)."""
    batch.check("adasum")


def test_refusals(batch):
    """Integer dtypes and reducescatter: InvalidArgumentError on every rank naming the tensor;
    IndexedSlices: NotImplementedError (sparse_as_dense=True); a Keras optimizer: ValueError."""
    batch.check("adasum_refused")


def test_distributed_gradient_tape(batch):
    """The tape's gradients are the Adasum of the ranks' local gradients; SGD steps eager and
    traced leave identical weights on every rank."""
    batch.check("adasum_tape")


def test_three_ranks_are_refused_by_name():
    TF_OPS.run_ok(3, "adasum_not_power_of_two")


def test_v1_delta_optimizer():
    """Graph mode, MonitoredTrainingSession-free Session: model deltas combined with Adasum,
    backward_passes_per_step 1 and 2, against the NumPy reference."""
    TF_OPS.run_ok(2, "v1_adasum")


@pytest.mark.parametrize("np_", [2, 4], ids=lambda n: f"np{n}")
def test_v1_delta_optimizer_initialized_by_global_variables_initializer(np_):
    """Issue 42: in a plain Session, global_variables_initializer() then
    broadcast_global_variables(0) (upstream's pattern) initializes and broadcasts the delta
    optimizer's own variables (GLOBAL_VARIABLES, as upstream's); backward_passes_per_step 1
    and 2 then train to the NumPy reference."""
    TF_OPS.run_ok(np_, "v1_adasum_global_init")
