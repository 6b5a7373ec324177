"""Upstream's `horovod.runner.common.util.env.get_env_rank_and_size`: a process's rank and the
job's size from the launcher's environment, before hvd.init() (upstream's tests use it to pick
process sets up front)."""

import os

# (rank variable, size variable), in the order they are trusted: horovodrun's own, Open MPI's,
# then PMI's (MPICH, Slurm).
_PAIRS = (
    ("HOROVOD_RANK", "HOROVOD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
)


def get_env_rank_and_size():
    """(rank, size) from the first pair of variables that is set; (0, 1) when none is (a
    process started alone). RuntimeError when only one of a pair is set."""
    for rank_var, size_var in _PAIRS:
        rank, size = os.environ.get(rank_var), os.environ.get(size_var)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            raise RuntimeError(
                f"cannot tell this process's rank and size: {rank_var if rank else size_var} is "
                f"set but {size_var if rank else rank_var} is not"
            )
    return 0, 1
