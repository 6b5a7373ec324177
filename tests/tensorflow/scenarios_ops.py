"""The scenario program of horovod.tensorflow's ops, run on every rank under mpirun by
test_ops.py: `python scenarios_ops.py NAME[,NAME...]` runs scenarios of every subject module
beside it (scenarios_ops_<subject>.py) in order in one process per rank (TF's import costs
seconds per rank, so the tests batch them), with the protocol of tests/support/scenario.py.
Every check is against a NumPy reference that each rank computes itself
(tests/support/reference.py, and reference_tf.py for TF's tensors).

Each op runs eagerly (some unnamed, so that per-process counter names are exercised, some
named) and inside a tf.function, where all of a scenario's ops live in one graph, run
concurrently and are matched across ranks by their node names.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's import

import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402
from tests.support import scenario  # noqa: E402

tf.get_logger().setLevel("ERROR")  # retracing notices: scenarios build many small functions

SCENARIOS = scenario.collect(*scenario.beside(__file__, "scenarios_ops_*.py"))

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
