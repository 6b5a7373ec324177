"""horovod.torch under real MPI ranks: run with a Python that has torch (make test/torch uses
build/torch-venv, which scripts/install-prereqs.sh makes)."""

import pytest

pytest.importorskip("torch", reason="torch is not installed in this Python (see make test/torch)")
