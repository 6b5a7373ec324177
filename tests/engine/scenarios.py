"""The engine's scenario program: `mpirun -np N python tests/engine/scenarios.py NAME[,NAME...]
[ARGS...]` runs scenarios of every subject module beside it (scenarios_<subject>.py) on each
rank, with the protocol of tests/support/scenario.py ("OK <NAME> rank=<r>" after each that
passes).

Each scenario checks results against a NumPy reference that every rank can compute itself
(tests/support/reference.py), so any failed check raises on the rank that sees it.
"""

import sys

import horovod.numpy as hvd
from tests.support import scenario

SCENARIOS = scenario.collect(*scenario.beside(__file__, "scenarios_*.py"))

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
