"""Issue 17, classes 2 and 7 (NumPy frontend): a group's size is agreed like a tensor's spec,
and a bad argument on one rank fails every rank instead of leaving the others waiting."""

from tests.support.mpi import ENGINE


def test_group_sizes_must_agree(world):
    ENGINE.run_ok(world, "group_sizes", timeout=90)


def test_bad_argument_on_one_rank_fails_every_rank(world):
    ENGINE.run_ok(world, "one_rank_args", timeout=90)
