"""tensorflow: the pinned CPU build imports and computes."""
import pytest

pytestmark = pytest.mark.layer("tensorflow")


def test_tensorflow_cpu_package(host, pins):
    packages = {name.replace("_", "-").lower(): p for name, p in
                host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()}
    assert packages["tensorflow-cpu"]["version"] == pins["TENSORFLOW_VERSION"]
    assert "tensorflow" not in packages  # the CPU wheel only, never the CUDA one
    assert packages["scikit-learn"]["version"] == pins["SCIKIT_LEARN_VERSION"]


def test_import_tensorflow(host, pins, run_ok):
    out = run_ok(host, "TF_CPP_MIN_LOG_LEVEL=2 python -c 'import tensorflow as tf; "
                       "print(tf.__version__, tf.test.is_built_with_cuda(), "
                       "int(tf.reduce_sum(tf.ones([4, 4]))))'")
    assert out.split()[-3:] == [pins["TENSORFLOW_VERSION"], "False", "16"]


def test_numpy_kept_at_the_pin(host, pins, run_ok):
    assert run_ok(host, "python -c 'import numpy; print(numpy.__version__)'") == pins["NUMPY_VERSION"]


def test_digits_data_set_ships_in_the_image(host, run_ok):
    # The examples train on it: it must load without a network.
    out = run_ok(host, "python -c 'from sklearn.datasets import load_digits; "
                       "print(load_digits().data.shape)'")
    assert out.strip() == "(1797, 64)"
