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


def test_init_with_different_sets_fails_on_every_rank(world):
    """Issue 42, class 1: a different list, or one set fewer on the last rank (which went on
    while the others waited in their next add), fails init everywhere."""
    ENGINE.run_ok(world, "ps_init_mismatch", timeout=120)
    ENGINE.run_ok(world, "ps_init_fewer", timeout=120)


def test_unusable_ranks_and_hand_set_ids_fail_on_every_rank(world):
    """Issue 42, classes 2 and 6: one rank's unusable ranks fail add_process_set on every rank
    (the others waited forever); NumPy integers are ranks; an id set by hand is a ValueError."""
    ENGINE.run_ok(world, "ps_bad_ranks", timeout=120)
