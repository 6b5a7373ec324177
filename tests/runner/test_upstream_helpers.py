"""Upstream's helper modules that its own test suites import (issue 42: upstream's
test_tensorflow*.py run unchanged): horovod.runner.common.util.env and horovod.tensorflow.util."""

import os
import subprocess
import sys

import pytest

from horovod.runner.common.util.env import get_env_rank_and_size
from tests.support.paths import ROOT


@pytest.fixture
def clean_env(monkeypatch):
    for prefix in ("HOROVOD", "OMPI_COMM_WORLD", "PMI"):
        for suffix in ("RANK", "SIZE"):
            monkeypatch.delenv(f"{prefix}_{suffix}", raising=False)
    return monkeypatch


def test_rank_and_size_from_the_launchers_variables(clean_env):
    assert get_env_rank_and_size() == (0, 1)  # started alone
    clean_env.setenv("PMI_RANK", "3")
    clean_env.setenv("PMI_SIZE", "4")
    assert get_env_rank_and_size() == (3, 4)
    clean_env.setenv("OMPI_COMM_WORLD_RANK", "1")
    clean_env.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert get_env_rank_and_size() == (1, 2)  # Open MPI's before PMI's
    clean_env.setenv("HOROVOD_RANK", "0")
    with pytest.raises(RuntimeError, match="HOROVOD_RANK is set but HOROVOD_SIZE is not"):
        get_env_rank_and_size()


def test_tensorflow_util_helpers():
    code = (
        "import tensorflow as tf\n"
        "from horovod.tensorflow import util\n"
        "import horovod.tensorflow as hvd\n"
        "assert util._executing_eagerly() and hvd._executing_eagerly()\n"
        "calls = []\n"
        "f = util._cache(lambda x: calls.append(x) or x * 2)\n"
        "assert f(3) == 6 and f(3) == 6 and calls == [3]\n"
        "v = [tf.Variable(1.0), tf.Variable(2.0)]\n"
        "assert util.refs_to_vars(util.vars_to_refs(v))[1] is v[1]\n"
        "assert float(util._make_subgraph(lambda: tf.constant(2.0))()) == 2.0\n"
        "print('OK')\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if "No module named 'tensorflow'" in p.stderr:
        pytest.skip("TensorFlow is not installed in this Python")
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stderr[-2000:]
