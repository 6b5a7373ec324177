"""horovod.torch's scenario program: `mpirun -np N python tests/torch/scenarios.py
NAME[,NAME...]` runs scenarios of its subject modules (scenarios_collectives.py,
scenarios_training.py), each checked against what every rank can compute itself (the protocol
of tests/support/scenario.py). scenarios_state.py, scenarios_hardening.py and
scenarios_second_order.py are programs of their own (the hardening one makes ml_dtypes
unimportable before anything imports it).
"""

import sys

import horovod.torch as hvd
from tests.support import scenario

SCENARIOS = scenario.collect(
    *scenario.beside(__file__, "scenarios_collectives.py", "scenarios_training.py")
)

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
