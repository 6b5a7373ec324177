"""What every rank of a launch inherits from horovodrun, whichever launcher starts it (mpirun's
-x in launch.py, the ssh/subprocess environment in gloo_launch.py), and the CPUs it may use."""

import os
import re

# Variables forwarded to every rank (mpirun forwards only what it is told to with -x when
# ranks start through ssh; on one host this keeps both paths alike).
FORWARD_NAMES = {
    "PATH",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "VIRTUAL_ENV",
    "PYTHONUNBUFFERED",
    "OMP_NUM_THREADS",
}
FORWARD_PREFIXES = ("HOROVOD_", "NCCL_", "TF_", "CUDA_", "GLOO_", "PYTHON")


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def forwarded(env):
    pattern = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
    return sorted(
        k
        for k in env
        if pattern.match(k) and (k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES))
    )
