"""hvd.join() under real mpirun: uneven data ends on every rank without a hang (issue 21)."""

import pytest

from tests.support.mpi import ENGINE


@pytest.mark.parametrize("average", ["set", "contributors"])
def test_join_with_uneven_steps(world, average):
    """Average divides by the set's size (upstream's, the default) or by the ranks that
    submitted (HOROVOD_JOIN_AVERAGE=contributors)."""
    env = {} if average == "set" else {"HOROVOD_JOIN_AVERAGE": average}
    ENGINE.run_ok(world, "join_uneven", timeout=120, env=env)


def test_ops_other_than_allreduce_fail_while_a_rank_has_joined(world):
    ENGINE.run_ok(world, "join_other_ops", timeout=120)


def test_gpu_tensor_fails_clearly_while_a_rank_has_joined(world):
    """Joined ranks contribute zeros to host-memory allreduces only: a GPU tensor's allreduce
    fails on every rank that submitted it, naming it a GPU allreduce and the joined rank."""
    ENGINE.run_ok(world, "join_gpu_tensor", timeout=120)
