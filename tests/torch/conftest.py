"""horovod.torch under real MPI ranks: run with a Python that has torch (make test/torch uses
build/torch-venv, which scripts/install-prereqs.sh makes)."""

import pytest

pytest.importorskip("torch", reason="torch is not installed in this Python (see make test/torch)")


def run_torch_batch(program, np_, batch, tmp_path_factory):
    """One launch of `batch` (scenario names of `program`) at `np_` ranks, for a module-scoped
    fixture. torch.compile's caches go in a directory of this launch's own: inductor's default,
    shared by every run on the machine (/tmp/torchinductor_<user>), keys the compiled backward by
    the forward graph, not by our custom ops' autograd code, so a graph compiled by an older tree
    can come back (a CI run on a machine where an older tree had run failed the compiled
    scenario's gradients once; not reproduced, a stale cache is the suspect)."""
    cache = tmp_path_factory.mktemp(f"inductor-np{np_}")
    env = {"OMP_NUM_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    return program.run_batch(np_, batch, env=env)
