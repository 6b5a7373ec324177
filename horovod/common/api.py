"""The public names every frontend exports alike: init and topology, build queries, reduce
ops, timeline, process sets and exceptions. A frontend does `from horovod.common.api import *`
and adds its own ops; the names are listed here once."""

from horovod.common.basics import (  # noqa: F401  (exported through __all__)
    build_info,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    join,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
    transport,
)
from horovod.common.engine_types import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from horovod.common.exceptions import (  # noqa: F401
    HorovodInternalError,
    HorovodInvalidArgumentError,
    HorovodMismatchError,
    HorovodShutdownError,
    MixedDevicesError,
)
from horovod.common.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

__all__ = [n for n in dir() if not n.startswith("_")]
