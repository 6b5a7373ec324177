"""tensorflow: the pinned build (tensorflow-cpu, or the CUDA one for the GPU flavour) imports and
computes (on the CPU: no GPU where this runs)."""

import pytest

pytestmark = pytest.mark.layer("tensorflow")

# tensorflow's requirements under its and-cuda extra, each checked against what is installed
# (pip check ignores extras).
AND_CUDA = r"""
import importlib.metadata as m
from packaging.requirements import Requirement
for req in map(Requirement, m.requires("tensorflow")):
    if (
        req.marker
        and req.marker.evaluate({"extra": "and-cuda"})
        and not req.marker.evaluate({"extra": ""})
    ):
        try:
            version = m.version(req.name)
        except m.PackageNotFoundError:
            version = None
        print(req.name, version, version is not None and req.specifier.contains(version))
"""


def test_tensorflow_package(host, pins, tf_package):
    packages = {
        name.replace("_", "-").lower(): p
        for name, p in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()
    }
    assert packages[tf_package]["version"] == pins["TENSORFLOW_VERSION"]
    # One TensorFlow wheel only: the CPU flavour never gets the CUDA one, nor the GPU one both.
    assert {"tensorflow", "tensorflow-cpu"} & set(packages) == {tf_package}
    assert packages["scikit-learn"]["version"] == pins["SCIKIT_LEARN_VERSION"]
    assert packages["tf-keras"]["version"] == pins["TF_KERAS_VERSION"]


def test_import_tensorflow(host, pins, run_ok, flavour):
    out = run_ok(
        host,
        "TF_CPP_MIN_LOG_LEVEL=2 python -c 'import tensorflow as tf; "
        "print(tf.__version__, tf.test.is_built_with_cuda(), "
        "int(tf.reduce_sum(tf.ones([4, 4]))))'",
    )
    assert out.split()[-3:] == [pins["TENSORFLOW_VERSION"], str(flavour == "gpu"), "16"]


def test_keras2_through_tf_keras(host, pins, run_ok):
    """TF_USE_LEGACY_KERAS=1 makes tf.keras the installed tf_keras (Keras 2), and it trains."""
    out = run_ok(
        host,
        "TF_CPP_MIN_LOG_LEVEL=2 TF_USE_LEGACY_KERAS=1 python -c 'import tensorflow as tf, "
        "tf_keras; m = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))]); "
        'm.compile("sgd", "mse"); m.fit(tf.ones((4, 2)), tf.ones((4, 1)), verbose=0); '
        'print(tf.keras.__name__.split(".")[0], tf_keras.__version__)\'',
    )
    assert out.split()[-2:] == ["tf_keras", pins["TF_KERAS_VERSION"]]


@pytest.mark.flavour("gpu")
def test_cuda_parent_satisfies_tensorflow_and_cuda(container, nvidia_wheels):
    """The cuda layer's wheels are exactly what tensorflow[and-cuda] asks for, within its ranges,
    though the layer installs plain `tensorflow`."""
    rc, out = container.exec_run(["python", "-c", AND_CUDA])
    assert rc == 0, out
    rows = [line.split() for line in out.decode().splitlines()]
    assert rows and all(ok == "True" for _, _, ok in rows), rows
    assert {name: version for name, version, _ in rows} == nvidia_wheels


def test_numpy_kept_at_the_pin(host, pins, run_ok):
    assert (
        run_ok(host, "python -c 'import numpy; print(numpy.__version__)'") == pins["NUMPY_VERSION"]
    )


def test_digits_data_set_ships_in_the_image(host, run_ok):
    # The examples train on it: it must load without a network.
    out = run_ok(
        host,
        "python -c 'from sklearn.datasets import load_digits; print(load_digits().data.shape)'",
    )
    assert out.strip() == "(1797, 64)"
