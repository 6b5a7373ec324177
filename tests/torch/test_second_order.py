"""Second (and third) derivatives through horovod.torch's collectives under real MPI ranks (2 and
3): every scenario of scenarios_second_order.py in one launch per world size; each test reports
its own scenario."""

from tests.support.fixtures import per_world
from tests.support.mpi import ROOT, Program
from tests.torch.conftest import run_torch_batch

SECOND_ORDER = Program(ROOT / "tests" / "torch" / "scenarios_second_order.py", timeout=300)
BATCH = [
    "allreduce",
    "broadcast",
    "allgather",
    "grouped_allgather",
    "alltoall",
    "alltoall_splits",
    "reducescatter",
    "grouped_reducescatter",
    "compiled",
]


@per_world(2, 3)
def ran(request, tmp_path_factory):
    return run_torch_batch(SECOND_ORDER, request.param, BATCH, tmp_path_factory)


def test_allreduce_and_grouped_allreduce_scaled(ran):
    ran.check("allreduce")


def test_broadcast(ran):
    ran.check("broadcast")


def test_allgather_uneven_rows(ran):
    ran.check("allgather")


def test_grouped_allgather(ran):
    ran.check("grouped_allgather")


def test_alltoall_even(ran):
    ran.check("alltoall")


def test_alltoall_splits(ran):
    ran.check("alltoall_splits")


def test_reducescatter_sum_average_scaled_uneven(ran):
    ran.check("reducescatter")


def test_grouped_reducescatter(ran):
    ran.check("grouped_reducescatter")


def test_compiled_derivatives_inside_one_graph(ran):
    ran.check("compiled")
