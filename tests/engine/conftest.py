"""Engine tests run real MPI ranks: each test launches the scenario program scenarios.py on N
ranks and checks every rank's verdict (tests/support/mpi.py; a hard timeout bounds every
launch, so a hang fails the test instead of stalling CI)."""

from tests.support.fixtures import world  # noqa: F401  (offered to this suite's tests)
