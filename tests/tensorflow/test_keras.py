"""horovod.tensorflow.keras (DistributedOptimizer, callbacks, load_model) and the TF2 examples
under real MPI ranks.

The scenarios (scenarios_keras.py) share one launch per world size (module fixture `keras_run`):
each prints its own verdict, and digests of what must be equal across ranks, which the tests
below compare. The examples run as users run them, under mpirun -np 2.
"""

import importlib.util
import re

import pytest

from tests.support import mpi
from tests.support.digests import assert_equal_on_all_ranks
from tests.support.fixtures import per_world
from tests.support.mpi import KERAS
from tests.support.paths import EXAMPLES

BATCH = [
    "fit",
    "accumulate",
    "save_load",
    "schedule_checkpoint",
    "metrics_differ",
    "mixed_precision",
    "join_fit",
    "join_tape",
]


@per_world(2, 3)
def keras_run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"keras_np{request.param}")
    return KERAS.run_batch(request.param, BATCH, env={"HVD_KERAS_TMPDIR": str(tmp)})


def test_fit_same_weights_and_metrics(keras_run):
    """model.fit with DistributedOptimizer(SGD momentum) + BroadcastGlobalVariablesCallback +
    MetricAverageCallback + LearningRateWarmupCallback, from rank-specific initial weights and
    data: afterwards the weights, the optimizer's variables and the whole History (loss,
    accuracy, val_*, learning_rate) are bitwise equal on all ranks; on each rank the logged
    val_loss equals the mean of every rank's own evaluate(); the optimizer is still an SGD."""
    keras_run.check("fit")
    assert_equal_on_all_ranks(keras_run, "fit", ["weights", "history", "optimizer", "keys"])


def test_warmup_schedule(keras_run):
    """The learning rate each batch ran with (recorded by a callback after the warmup one)
    equals the formula in LearningRateWarmupCallback's docstring for the 2 warmup epochs,
    then stays at initial_lr (checked on every rank inside the fit scenario)."""
    keras_run.check("fit")


def test_backward_passes_per_step(keras_run):
    """backward_passes_per_step=2, average_aggregated_gradients False and True: in an eager
    loop the weights and `iterations` change only on every 2nd apply_gradients and
    reduce_gradients runs once per 2 passes; eager and model.fit (tf.cond in the traced step)
    both match a NumPy reference (mean over ranks of each rank's 2-pass sum or mean); the
    fit weights are equal on all ranks."""
    keras_run.check("accumulate")
    assert_equal_on_all_ranks(keras_run, "accumulate", ["weights"])


def test_save_and_load_model(keras_run):
    """For Adam and a registered user subclass of SGD: model.save() of a model trained with
    DistributedOptimizer loads in plain keras.models.load_model as the plain class;
    hvd.load_model re-wraps it (an instance of the class, same name, restored slots and
    iterations) and training continues with equal weights on all ranks. Re-wrapping does not
    nest classes; a tf.compat.v1 optimizer is refused; horovod.keras (and .callbacks) is
    horovod.tensorflow.keras."""
    keras_run.check("save_load")
    assert_equal_on_all_ranks(keras_run, "save_load", ["weights"])


def test_schedule_and_best_checkpoint(keras_run):
    """LearningRateScheduleCallback (staircase, start_epoch=1) sets initial_lr * multiplier(e)
    at each epoch's first batch and leaves earlier epochs alone; BestModelCheckpoint writes
    (a loadable .keras file) on rank 0 only."""
    keras_run.check("schedule_checkpoint")


def test_ranks_logging_different_metrics_are_named(keras_run):
    """MetricAverageCallback with different metrics per rank (other names, another count, none
    on one rank) raises tf.errors.FailedPreconditionError on every rank naming each rank's
    metrics, without waiting; the same metrics are still averaged."""
    keras_run.check("metrics_differ")


# ---- examples -------------------------------------------------------------------------------


def run_example(name, *args, np_=2, timeout=180):
    rc, out, err = mpi.launch(np_, EXAMPLES / name, *args, tf=True, timeout=timeout)
    assert rc == 0, f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
    return out


needs_sklearn = pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="the digits examples need scikit-learn"
)


def accuracy(out):
    found = re.findall(r"^Test accuracy: ([0-9.]+)", out, re.M)
    assert len(found) == 1, f"expected one accuracy line (rank 0):\n{out}"
    return float(found[0])


@needs_sklearn
def test_mixed_precision_ranks_skip_steps_together(keras_run):
    """mixed_float16 with a batch whose gradients overflow on rank 1 only: every rank skips
    that step (Keras' LossScaleOptimizer around DistributedOptimizer, and the other way
    round), so weights and loss scales stay equal (issue 17, class 1)."""
    keras_run.check("mixed_precision")
    for how in ("compiled", "wrapped"):
        assert_equal_on_all_ranks(keras_run, f"mixed_precision_{how}", ["weights", "scale"])


def test_join_with_uneven_data(keras_run):
    """Uneven shards: Keras fit and a custom tape loop end on every rank once the shorter ranks
    join; join() names the last rank, and after a broadcast from it the weights are equal."""
    for name in ("join_fit", "join_tape"):
        keras_run.check(name)
        assert_equal_on_all_ranks(keras_run, name, ["weights"])


def test_join_fit_with_metric_average_stalls_as_documented():
    """Issue 54, class 13 (docs/usage.md "Uneven data", MetricAverageCallback's docstring): with
    shards of different sizes, model.fit with MetricAverageCallback stalls before join(): the
    shorter rank's epoch-end allgather meets the longer rank's gradient allreduce. The stall
    inspector names both after HOROVOD_STALL_CHECK_TIME_SECONDS, and the stall shutdown fails
    fit on every rank (AbortedError) and ends the job. Its own launch: the job is aborted."""
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "5"}
    rc, out, err = KERAS.launch(2, "join_fit_metric_average_stalls", env=env, timeout=120)
    both = out + err
    assert rc != 0 and "FAIL" not in out, f"rc={rc}\nstdout:\n{out}\nstderr:\n{err[-4000:]}"
    assert set(re.findall(r"STALLED rank=(\d)", out)) == {"0", "1"}, both[-6000:]
    # Rank 1's exchange waits for rank 0; rank 0's third step waits for rank 1.
    waits = re.findall(r"tensor '([^']+)' \((\w+)\) has waited \d+ s for rank \[(\d)\]", both)
    assert ("allgather_object.MetricAverageCallback.metrics.sizes", "ALLGATHER", "0") in waits, (
        both[-6000:]
    )
    assert any(kind == "ALLREDUCE" and rank == "1" for _, kind, rank in waits), both[-6000:]
    assert "Horovod stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=5)" in both


def test_keras_digits_example():
    """examples/tensorflow2_keras_digits.py (model.fit + the callbacks) on 2 ranks learns:
    test accuracy > 0.9 (about 0.97 on 1 rank with the full training set)."""
    out = run_example("tensorflow2_keras_digits.py", "--epochs", "10")
    assert "Ranks: 2" in out
    assert accuracy(out) > 0.9, out
    assert "weights identical" in out and len(re.findall(r"^rank \d on ", out, re.M)) == 2, out


@needs_sklearn
def test_custom_loop_digits_example():
    """examples/tensorflow2_digits_custom_loop.py (DistributedGradientTape in a tf.function,
    broadcast_variables after the first step) on 2 ranks: test accuracy > 0.9."""
    out = run_example("tensorflow2_digits_custom_loop.py", "--epochs", "10")
    assert "Ranks: 2" in out
    assert accuracy(out) > 0.9, out


def test_synthetic_benchmark_example():
    """examples/tensorflow2_synthetic_benchmark.py on 2 ranks, with a small model and few
    batches: prints upstream's lines (per-iteration, per-CPU and total with +- intervals)."""
    out = run_example(
        "tensorflow2_synthetic_benchmark.py",
        "--model",
        "MobileNetV3Small",
        "--batch-size",
        "4",
        "--num-classes",
        "10",
        "--num-warmup-batches",
        "1",
        "--num-batches-per-iter",
        "1",
        "--num-iters",
        "2",
        "--threads",
        "1",
    )
    assert "Number of CPUs: 2" in out
    assert len(re.findall(r"^Iter #\d: [0-9.]+ img/sec per CPU$", out, re.M)) == 2, out
    assert re.search(r"^Img/sec per CPU: [0-9.]+ \+-[0-9.]+$", out, re.M), out
    assert re.search(r"^Total img/sec on 2 CPU\(s\): [0-9.]+ \+-[0-9.]+$", out, re.M), out
