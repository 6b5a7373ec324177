"""Process sets under real mpirun (np 2 and 3): every collective within a set against NumPy,
two sets at once, sets given to init (ranks and an mpi4py communicator), join within a set,
removal, and mistakes named on every rank (issue 21)."""

from tests.support.mpi import ENGINE


def test_collectives_in_two_sets_at_once(world):
    ENGINE.run_ok(world, "ps_collectives", timeout=180)


def test_sets_given_to_init_and_removed(world):
    ENGINE.run_ok(world, "ps_init", timeout=120)


def test_mistakes_fail_on_every_rank_naming_global_ranks(world):
    ENGINE.run_ok(world, "ps_errors", timeout=120)
