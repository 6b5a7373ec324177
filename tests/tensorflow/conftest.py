"""TensorFlow tests run real MPI ranks: each test launches a scenario program (scenarios_ops.py,
scenarios_keras.py) on N ranks and checks every rank's verdict (tests/support/mpi.py: a hard
timeout bounds every launch). Importing TF costs seconds per rank, so the tests share launches
of several scenarios (mpi.Batch)."""

from tests.support.fixtures import world  # noqa: F401  (offered to this suite's tests)
