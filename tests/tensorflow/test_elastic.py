"""hvd.elastic (horovod.tensorflow.elastic, horovod.tensorflow.keras.elastic) on a fixed world,
under real mpirun with 2 and 3 ranks: one launch per world size runs the scenarios of
scenarios_elastic.py; each rank checks what it can itself, and the DIGEST lines it prints must
be equal on every rank."""

from tests.support.digests import assert_equal_on_all_ranks
from tests.support.fixtures import per_world
from tests.support.mpi import Program
from tests.support.paths import ROOT

ELASTIC = Program(ROOT / "tests" / "tensorflow" / "scenarios_elastic.py", tf=True, timeout=180)
BATCH = [
    "keras_fit",
    "custom_loop",
    "restore",
    "sync",
    "internal_error",
    "hosts_updated",
    "peer_shutdown",
]  # peer_shutdown last: it ends the engine


@per_world(2, 3)
def elastic_run(request):
    return ELASTIC.run_batch(request.param, BATCH)


def test_keras_fit_upstream_style(elastic_run):
    """Upstream's Keras elastic example shape (KerasState, the three callbacks, @run train):
    from rank-specific weights, ends with equal weights and optimizer state on every rank,
    epoch 3 / batch 0, 13 steps, one sync and a commit every 2 batches and per epoch."""
    elastic_run.check("keras_fit")
    assert_equal_on_all_ranks(elastic_run, "keras_fit", ["weights", "state"])


def test_custom_loop_upstream_style(elastic_run):
    """Upstream's TF2 custom-loop example shape (TensorFlowKerasState, DistributedGradientTape,
    commit every 3 batches): equal weights on every rank, batch 9, and restore() after an
    uncommitted step brings back the last commit."""
    elastic_run.check("custom_loop")
    assert_equal_on_all_ranks(elastic_run, "custom_loop", ["weights"])


def test_restore_returns_to_the_commit(elastic_run):
    """KerasState and TensorFlowState: restore() brings back committed weights, optimizer
    variables and extra values."""
    elastic_run.check("restore")


def test_sync_makes_ranks_equal(elastic_run):
    """sync() gives every rank rank 0's weights, optimizer variables and extra values."""
    elastic_run.check("sync")
    assert_equal_on_all_ranks(elastic_run, "sync", ["weights"])


def test_internal_error_restores_and_reraises(elastic_run):
    """A HorovodInternalError (or TF's AbortedError from a Horovod kernel) inside the function:
    restored to the last commit and re-raised once, naming the elastic launch (--min-np); no
    hang."""
    elastic_run.check("internal_error")
    assert_equal_on_all_ranks(elastic_run, "internal_error", ["weights"])


def test_hosts_updated_interrupt_retries(elastic_run):
    """HostsUpdatedInterrupt: state kept, reset callbacks run, the function called again
    (after a sync unless skip_sync)."""
    elastic_run.check("hosts_updated")
    assert_equal_on_all_ranks(elastic_run, "hosts_updated", ["weights"])


def test_real_peer_failure_restores_and_reraises(elastic_run):
    """A real failure: the last rank shuts its engine down inside the function while the others
    allreduce; they restore the last commit and re-raise naming issue 18, and the job ends."""
    elastic_run.check("peer_shutdown")
