"""horovod.tensorflow.keras in both Kerases TensorFlow 2.21 runs: Keras 3 (the default) and
Keras 2 (tf_keras, with TF_USE_LEGACY_KERAS=1), under real mpirun on 2 and 3 ranks; with
SyncBatchNormalization, PartialDistributedOptimizer and PartialDistributedGradientTape.

One launch per (Keras, world size) runs every scenario of scenarios_keras_flavours.py (the
module fixture `flavour_run`); the tests read its verdicts and compare the ranks' digests.
An upstream-style Keras 2 program (upstream_style/keras_synthetic_benchmark.py) runs unchanged.
"""

import importlib.util
import re

import pytest

from tests.support import digests, mpi
from tests.support.fixtures import per_world
from tests.support.paths import ROOT

PROGRAM = mpi.Program(
    ROOT / "tests" / "tensorflow" / "scenarios_keras_flavours.py", tf=True, timeout=300
)
BATCH = [
    "flavour",
    "fit",
    "load_model",
    "accumulate",
    "partial_optimizer",
    "partial_tape",
    "sync_bn_eager",
    "sync_bn_function",
    "sync_bn_empty_rank",
    "sync_bn_gradients",
    "sync_bn_fit",
    "sync_bn_auto_names",  # last: it shifts rank 1's automatic layer names
]
HAVE_TF_KERAS = importlib.util.find_spec("tf_keras") is not None
FLAVOURS = [
    pytest.param({"TF_USE_LEGACY_KERAS": "0"}, id="keras3"),
    pytest.param(
        {"TF_USE_LEGACY_KERAS": "1"},
        id="tf_keras",
        marks=pytest.mark.skipif(not HAVE_TF_KERAS, reason="tf-keras is not installed"),
    ),
]


@pytest.fixture(scope="module", params=FLAVOURS)
def flavour_env(request):
    return request.param


@per_world(2, 3)
def flavour_run(request, flavour_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"keras_flavours_np{request.param}")
    env = {**flavour_env, "HVD_KERAS_TMPDIR": str(tmp)}
    return PROGRAM.run_batch(request.param, BATCH, env=env, timeout=600)


def ranks_agree(batch, prefix, what):
    """Whether every rank printed a `what` digest for each scenario starting with prefix, and
    whether they are all equal (asserts the first; returns the second per scenario)."""
    found = {k: v for k, v in digests.found(batch, prefix).items() if k[1] == what}
    assert found, f"no {prefix} {what} digests:\n{batch.out[-4000:]}"
    for key, by_rank in found.items():
        assert set(by_rank) == set(range(batch.np)), f"{key}: digests from {sorted(by_rank)}"
    return {key: len(set(by_rank.values())) == 1 for key, by_rank in found.items()}


def test_follows_tf_keras(flavour_run):
    """The callbacks and SyncBatchNormalization derive from tf.keras' classes: tf_keras' under
    TF_USE_LEGACY_KERAS=1, Keras 3's otherwise."""
    flavour_run.check("flavour")


def test_fit_with_distributed_optimizer_and_callbacks(flavour_run):
    """model.fit with DistributedOptimizer and the broadcast, metric-average and warmup
    callbacks (and, in tf_keras, also a legacy optimizer): learns, loss averaged, weights
    bitwise equal on all ranks."""
    flavour_run.check("fit")
    assert all(ranks_agree(flavour_run, "fit", "weights").values())


def test_load_model(flavour_run):
    """hvd.load_model re-wraps a saved model's optimizer (restored iterations) and training
    continues with equal weights on all ranks."""
    flavour_run.check("load_model")
    assert all(ranks_agree(flavour_run, "load_model", "weights").values())


def test_backward_passes_per_step(flavour_run):
    """backward_passes_per_step=2 in model.fit (each optimizer family): the weights match a
    NumPy reference of the accumulated, averaged updates, `iterations` counts applied updates,
    and the ranks agree."""
    flavour_run.check("accumulate")
    assert all(ranks_agree(flavour_run, "accumulate", "weights").values())


@pytest.mark.parametrize("scenario", ["partial_optimizer", "partial_tape"])
def test_partial_distribution(flavour_run, scenario):
    """Local layers (PartialDistributedOptimizer in fit; PartialDistributedGradientTape in a
    tf.function, whose gradients are checked against each rank's own) end up different on
    every rank after training on rank-specific data; the other weights are equal."""
    flavour_run.check(scenario)
    assert all(ranks_agree(flavour_run, scenario, "shared").values())
    local = digests.found(flavour_run, scenario)[(scenario, "local")]
    assert len(set(local.values())) == flavour_run.np, f"local layers: {local}"


@pytest.mark.parametrize(
    "scenario",
    [
        "sync_bn_eager",
        "sync_bn_function",
        "sync_bn_empty_rank",
        "sync_bn_gradients",
        "sync_bn_fit",
        "sync_bn_auto_names",
    ],
)
def test_sync_batch_normalization(flavour_run, scenario):
    """SyncBatchNormalization with a different batch size on every rank (an empty one in
    sync_bn_empty_rank) equals Keras' BatchNormalization of the concatenated global batch
    within 1e-5: outputs, moving mean and variance, inference; eagerly, in a tf.function and
    in model.fit (where weights stay equal across ranks); and its gradients (inputs: those of
    the total loss over the global batch; gamma, beta: summed over ranks, the reference's).
    sync_bn_auto_names: one rank built an extra layer first, so Keras' automatic layer names
    differ across ranks; eager and traced calls and model.fit (eager and not) still pair up
    (issue 54, class 12: eagerly the allreduce was named after the layer, and every rank
    waited)."""
    flavour_run.check(scenario)


@pytest.mark.skipif(not HAVE_TF_KERAS, reason="tf-keras is not installed")
def test_upstream_style_keras2_program_runs_unchanged():
    """An upstream-style Keras 2 program (tf.keras.applications, tf.optimizers.SGD,
    compile(experimental_run_tf_function=False), hvd callbacks) runs under
    TF_USE_LEGACY_KERAS=1 on 2 ranks and ends with equal trainable weights."""
    rc, out, err = mpi.launch(
        2,
        ROOT / "tests" / "tensorflow" / "upstream_style" / "keras_synthetic_benchmark.py",
        tf=True,
        env={"TF_USE_LEGACY_KERAS": "1"},
        timeout=300,
    )
    assert rc == 0, f"rc={rc}\nstdout:\n{out}\nstderr:\n{err[-4000:]}"
    assert len(re.findall(r"^Iter #\d: [0-9.]+ img/sec per CPU$", out, re.M)) == 2, out
    assert "trainable weights identical on all ranks: True" in out, out
