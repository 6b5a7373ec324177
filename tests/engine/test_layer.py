"""The shared submission layer (horovod/common) through the smallest frontend written on it
(array_frontend.py), under real MPI ranks (scenarios_layer.py)."""

from tests.support.mpi import ENGINE


def test_every_collective_through_the_smallest_frontend(world):
    ENGINE.run_ok(world, "layer_collectives")


def test_process_sets_through_the_smallest_frontend(world):
    ENGINE.run_ok(world, "layer_process_set")


def test_one_ranks_bad_argument_fails_every_rank_named(world):
    ENGINE.run_ok(world, "layer_bad_arguments")
