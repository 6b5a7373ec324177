"""Upstream's `horovod.common.util` build queries, for code that imports them from there
(`from horovod.common.util import gloo_built`); they are horovod.common.basics' own."""

from horovod.common.basics import (  # noqa: F401  (the names upstream's module has)
    cuda_built,
    gloo_built,
    mpi_built,
    nccl_built,
    rocm_built,
)
