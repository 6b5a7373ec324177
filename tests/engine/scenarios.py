"""The engine's scenario program: `mpirun -np N python tests/engine/scenarios.py NAME[,NAME...]
[ARGS...]` runs scenarios of every subject module below on each rank, with the protocol of
tests/support/scenario.py ("OK <NAME> rank=<r>" after each that passes).

Each scenario checks results against a NumPy reference that every rank can compute itself
(reference.py), so any failed check raises on the rank that sees it.
"""

import sys

import horovod.numpy as hvd
from tests.engine import (
    scenarios_adasum,
    scenarios_agreement,
    scenarios_autotune,
    scenarios_collectives,
    scenarios_errors,
    scenarios_faults,
    scenarios_frontend,
    scenarios_hardening,
    scenarios_hierarchical,
    scenarios_join,
    scenarios_layer,
    scenarios_lifecycle,
    scenarios_observability,
    scenarios_process_sets,
    scenarios_summary,
)
from tests.support import scenario

SCENARIOS = scenario.collect(
    scenarios_adasum,
    scenarios_agreement,
    scenarios_autotune,
    scenarios_collectives,
    scenarios_errors,
    scenarios_faults,
    scenarios_frontend,
    scenarios_hardening,
    scenarios_hierarchical,
    scenarios_join,
    scenarios_layer,
    scenarios_lifecycle,
    scenarios_observability,
    scenarios_process_sets,
    scenarios_summary,
)

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
