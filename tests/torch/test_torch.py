"""horovod.torch under real MPI ranks (2 and 3): every scenario of scenarios.py, in one launch
per world size (importing torch costs seconds per rank); each test reports its own scenario."""

from tests.support.fixtures import per_world
from tests.support.mpi import ROOT, Program
from tests.torch.conftest import run_torch_batch

TORCH = Program(ROOT / "tests" / "torch" / "scenarios.py", timeout=300)
BATCH = [
    "allreduce",
    "grouped",
    "collectives",
    "autograd",
    "optimizer",
    "adasum_optimizer",
    "optimizer_state",
    "process_set",
    "errors",
    "sparse",
    "sync_batch_norm",
    "elastic_state",
    "compiled",
]


@per_world(2, 3)
def ran(request, tmp_path_factory):
    return run_torch_batch(TORCH, request.param, BATCH, tmp_path_factory)


def test_allreduce_every_dtype_in_place_async_scaled_compressed(ran):
    ran.check("allreduce")


def test_grouped_forms(ran):
    ran.check("grouped")


def test_allgather_broadcast_alltoall_reducescatter_objects(ran):
    ran.check("collectives")


def test_gradients_through_the_collectives(ran):
    ran.check("autograd")


def test_distributed_optimizer_equals_one_process_on_all_the_data(ran):
    ran.check("optimizer")


def test_adasum_delta_optimizer_equals_upstreams_on_one_process(ran):
    ran.check("adasum_optimizer")


def test_optimizer_state_broadcast(ran):
    ran.check("optimizer_state")


def test_process_sets(ran):
    ran.check("process_set")


def test_bad_input_fails_every_rank_named(ran):
    ran.check("errors")


def test_sparse_gradients(ran):
    ran.check("sparse")


def test_sync_batch_norm_equals_one_batch_norm_over_every_rank(ran):
    ran.check("sync_batch_norm")


def test_elastic_state_syncs_commits_and_restores(ran):
    ran.check("elastic_state")


def test_torch_compile_fullgraph_equals_eager(ran):
    ran.check("compiled")


# Every public name of upstream Horovod 0.28.1's horovod.torch (horovod/torch/__init__.py),
# listed by hand: 67 names, the elastic module among them.
UPSTREAM_NAMES = """
elastic Compression allgather_object broadcast_object broadcast_optimizer_state broadcast_parameters
allreduce allreduce_async allreduce_ allreduce_async_ grouped_allreduce grouped_allreduce_async
grouped_allreduce_ grouped_allreduce_async_ sparse_allreduce_async allgather allgather_async
grouped_allgather grouped_allgather_async broadcast broadcast_async broadcast_ broadcast_async_
alltoall alltoall_async reducescatter reducescatter_async grouped_reducescatter
grouped_reducescatter_async join barrier poll synchronize init shutdown is_initialized
start_timeline stop_timeline size local_size cross_size rank local_rank cross_rank
mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built
ccl_built cuda_built rocm_built ProcessSet global_process_set add_process_set
remove_process_set Average Sum Adasum Min Max Product HorovodInternalError
DistributedOptimizer SyncBatchNorm
""".split()


def test_every_upstream_name_is_here():
    import horovod.torch as hvd  # noqa: PLC0415  (torch only where this suite runs)

    assert len(UPSTREAM_NAMES) == 67
    missing = [n for n in UPSTREAM_NAMES if not hasattr(hvd, n)]
    assert not missing, missing
    for n in ("run", "TorchState", "ElasticSampler", "State", "ObjectState"):
        assert hasattr(hvd.elastic, n), n
    assert callable(hvd.DistributedOptimizer) and issubclass(hvd.SyncBatchNorm, torch_module())


def torch_module():
    import torch  # noqa: PLC0415

    return torch.nn.Module
