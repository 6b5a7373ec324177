"""horovod.torch under bad input and upstream's contracts (issue 54), under real MPI ranks (2 and
3): every scenario of scenarios_hardening.py in one launch per world size."""

from tests.support.fixtures import per_world
from tests.support.mpi import ROOT, Program
from tests.torch.conftest import run_torch_batch

HARDENING = Program(ROOT / "tests" / "torch" / "scenarios_hardening.py", timeout=300)
BATCH = [
    "bfloat16",
    "compile_graph_breaks",
    "optimizer_process_set_outside",
    "two_grouped_optimizers",
    "load_state_dict_resets",
    "in_place_negative_view",
    "bad_input_on_one_rank",
    "join_average",  # last: rank 0 joins and leaves the scenario early
]


@per_world(2, 3)
def ran(request, tmp_path_factory):
    return run_torch_batch(HARDENING, request.param, BATCH, tmp_path_factory)


def test_bfloat16_without_ml_dtypes(ran):
    ran.check("bfloat16")


def test_compile_without_fullgraph_breaks_the_graph_and_runs_eagerly(ran):
    ran.check("compile_graph_breaks")


def test_optimizer_with_a_process_set_on_ranks_outside_it(ran):
    ran.check("optimizer_process_set_outside")


def test_two_grouped_optimizers_in_one_backward(ran):
    ran.check("two_grouped_optimizers")


def test_load_state_dict_resets_the_passes(ran):
    ran.check("load_state_dict_resets")


def test_in_place_op_on_a_negative_view(ran):
    ran.check("in_place_negative_view")


def test_one_ranks_bad_input_fails_every_rank_named(ran):
    ran.check("bad_input_on_one_rank")


def test_average_while_ranks_have_joined_counts_them(ran):
    ran.check("join_average")
