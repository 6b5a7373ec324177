"""horovod.torch's elastic state (TorchState with extra modules and optimizers, ElasticSampler's
equal shards) and SyncBatchNorm's dtypes, under real MPI ranks (2 and 3): every scenario of
scenarios_state.py in one launch per world size; each test reports its own scenario."""

from tests.support.fixtures import per_world
from tests.support.mpi import ROOT, Program
from tests.torch.conftest import run_torch_batch

STATE = Program(ROOT / "tests" / "torch" / "scenarios_state.py", timeout=300)
BATCH = [
    "sync_batch_norm_dtypes",
    "sync_batch_norm_dtypes_batch_stats",
    "elastic_sampler_equal_shards",
    "elastic_sampler_training_steps",
    "torch_state_extra_modules",
    "torch_state_extra_modules_loop",
    "torch_state_snapshot_resume",
]


@per_world(2, 3)
def ran(request, tmp_path_factory):
    return run_torch_batch(STATE, request.param, BATCH, tmp_path_factory)


def test_sync_batch_norm_output_in_the_input_dtype_stats_in_the_modules(ran):
    ran.check("sync_batch_norm_dtypes")


def test_sync_batch_norm_batch_statistics_in_every_dtype(ran):
    ran.check("sync_batch_norm_dtypes_batch_stats")


def test_elastic_sampler_same_length_on_every_rank(ran):
    ran.check("elastic_sampler_equal_shards")


def test_elastic_sampler_same_steps_after_a_restore(ran):
    ran.check("elastic_sampler_training_steps")


def test_torch_state_syncs_commits_restores_keyword_modules(ran):
    ran.check("torch_state_extra_modules")


def test_torch_state_keyword_modules_in_the_elastic_loop(ran):
    ran.check("torch_state_extra_modules_loop")


def test_torch_state_snapshot_resumes_into_the_scripts_objects(ran):
    ran.check("torch_state_snapshot_resume")
