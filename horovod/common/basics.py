"""init/shutdown, topology and build queries shared by every frontend.

Importing this module does not initialize MPI; `init()` does.
"""

import atexit
import collections
import importlib
import os

from horovod import __version__
from horovod.common import naming as _naming
from horovod.common import process_sets as _ps
from horovod.common.engine_types import JOIN as _JOIN
from horovod.common.engine_types import (  # noqa: F401  (the engine's, re-exported)
    REDUCE_OPS,
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
)
from horovod.common.exceptions import NOT_INITIALIZED as _NOT_INITIALIZED

_core = None
_topology = None


def _lib():
    global _core
    if _core is None:
        _core = importlib.import_module("horovod._core")
    return _core


def init(comm=None, process_sets=None):
    """Start the engine. `comm` may be an mpi4py communicator (the job then runs on its
    ranks) or None for MPI_COMM_WORLD. `process_sets`: hvd.ProcessSet objects to create (every
    rank passes the same list), or "dynamic" (upstream's spelling; sets can always be added
    later). Calling it again while running is a no-op. Over TCP, calling it after shutdown(),
    or after a peer's death ended the engine (HorovodInternalError), forms a new world from the
    environment at that moment (rank, size, rendezvous): elastic training in process."""
    global _topology
    sets = _ps.init_process_sets(process_sets, comm)
    handle = 0
    if comm is not None:
        if isinstance(comm, (list, tuple)):
            raise ValueError(
                "init(comm=[ranks]) is not supported; pass an mpi4py communicator, "
                "e.g. MPI.COMM_WORLD.Create(MPI.COMM_WORLD.group.Incl(ranks))"
            )
        from mpi4py import MPI

        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise ValueError("init(comm=...) takes an mpi4py communicator other than COMM_NULL")
        handle = MPI._handleof(comm)
    # The engine tells whether this call formed a new world: the first init, or (TCP) one after
    # shutdown() or after a peer's death ended the last one. Running on, it is a no-op.
    worlds = _lib().worlds_formed()
    if is_initialized() and sets and _engine_alive():
        raise ValueError(
            "Horovod is already initialized: add process sets with hvd.add_process_set()"
        )
    _lib().init(handle, _ps.describe_initial_sets(sets))
    _topology = _lib().topology()
    if _lib().worlds_formed() != worlds:
        _new_world()
        _ps.add_initial_sets(sets)
    # atexit runs handlers last-registered-first: registering again here puts our shutdown
    # before the MPI_Finalize of an mpi4py imported before init(); once, however many worlds.
    atexit.unregister(shutdown)
    atexit.register(shutdown)


def _engine_alive():
    """Whether the running engine still runs: not after a peer's death ended it (TCP)."""
    return _lib().engine_alive()


def _new_world():
    """What a frontend keeps per world starts afresh: unnamed ops count from 0 on every rank
    (survivors and newcomers alike), and the last world's process sets are gone."""
    _naming.reset()
    _ps.reset()


def shutdown():
    """Stop the engine on this rank. Other ranks' pending and later ops fail with
    HorovodShutdownError naming this rank. Registered with atexit."""
    global _topology
    if _core is not None and _core.is_initialized():
        _core.shutdown()
    _topology = None


atexit.register(shutdown)


def is_initialized():
    return _core is not None and _core.is_initialized()


def _topo(key):
    if _topology is None or not is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return _topology[key]


def rank():
    return _topo("rank")


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome-trace timeline to `file_path` (rank 0 writes; elsewhere a
    no-op), replacing the one being written, HOROVOD_TIMELINE's included. `mark_cycles` adds a
    CYCLE_START event for each negotiation round that ran ops. Returns once the file is open."""
    if not is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    _lib().start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops the timeline and closes its file (a complete JSON array); a no-op if none is
    being written."""
    if not is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    _lib().stop_timeline()


def size():
    return _topo("size")


def local_rank():
    return _topo("local_rank")


def local_size():
    return _topo("local_size")


def cross_rank():
    return _topo("cross_rank")


def cross_size():
    return _topo("cross_size")


def is_homogeneous():
    return _topo("homogeneous")


def join(device=-1, process_set=None):
    """This rank has run out of data: until every rank has joined, it takes part in the other
    ranks' allreduces with zeros (Average divides by the set's size, as upstream, or by the
    ranks that submitted under HOROVOD_JOIN_AVERAGE=contributors), and any other
    op they submit fails on every rank naming the joined ranks. Blocks until every rank has
    joined; returns the last rank to join (whose model saw the most data: broadcast from it to
    make all ranks equal again). `device` is accepted for upstream compatibility (host only).
    With `process_set`, among its ranks only."""
    import numpy as np  # noqa: PLC0415  (basics stays importable without NumPy)

    if not is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    out = np.zeros(1, np.int32)
    handle = _lib().enqueue(
        _JOIN,
        "horovod.join",
        [out],
        [out],
        0,
        0,
        1.0,
        1.0,
        [],
        process_set=_ps.process_set_id(process_set),
    )
    _lib().wait(handle, -1.0)
    return int(out[0])


def mpi_threads_supported():
    """True if MPI runs with MPI_THREAD_MULTIPLE (needed to use mpi4py beside Horovod freely)."""
    return _topo("mpi_threads_multiple")


def build_info():
    """What this build has: a dict with horovod_version, mpi_built, mpi_library, nccl_built,
    gloo_built, cuda_built, cpu_operations, transport. Does not initialize MPI."""
    info = dict(_lib().build_info())
    info["horovod_version"] = __version__
    info["transport"] = transport()
    return info


def mpi_built():
    return bool(_lib().build_info()["mpi_built"])


def transport():
    """The transport the engine runs on: "mpi" (started by mpirun) or "tcp" (torchrun, upstream
    Gloo's variables, horovodrun --gloo). Before init: the one init() would choose here."""
    if is_initialized():
        return _topo("transport")
    return _lib().transport_choice()


def mpi_enabled():
    return is_initialized() and _topo("transport") == "mpi"


def nccl_built():
    """NCCL version code the build links (0: not built with NCCL)."""
    return int(_lib().build_info()["nccl_built"])


def gloo_built():
    """True: the TCP transport takes Gloo's place (the same launch variables, no MPI needed)."""
    return True


def gloo_enabled():
    return is_initialized() and _topo("transport") == "tcp"


def cuda_built():
    return bool(_lib().build_info()["cuda_built"])


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


# One HOROVOD_* knob as the engine declares it (csrc/common/config.h): its default as text,
# type "int", "float", "bool" or "string", min/max for numbers (else None), the values a string
# knob accepts (empty: any), and whether every rank must set it equally.
Knob = collections.namedtuple("Knob", "env default doc type min max choices equal")


def config_knobs():
    """Every HOROVOD_* variable the engine reads, as Knob tuples. Does not initialize MPI."""
    return [Knob(*k) for k in _lib().config_knobs()]


def check_knob(env, value):
    """'' if `value` is valid for the knob `env`, else the error init() would raise for it
    (the engine's own parser and bounds). Does not initialize MPI."""
    return _lib().check_knob(env, value)


def config_values():
    """{HOROVOD_* name: value} as the engine parsed them (int, float, bool or str): after
    init() the values it runs with, before it the environment as init() would parse it (a bad
    value raises ValueError). Python reads knobs here, never from os.environ with a default of
    its own, so that the engine's defaults and bounds are the only ones."""
    return dict(_lib().config_values())
