"""Topology, init on mpi4py communicators, configuration errors at init, log lines during init
(test_lifecycle.py, test_hardening.py, test_summary.py)."""

import sys

import numpy as np

import horovod.numpy as hvd
from tests.support.scenario import expect_error, manages_init


def sc_topology():
    r, n = hvd.rank(), hvd.size()
    assert 0 <= r < n
    assert hvd.local_size() == n and hvd.local_rank() == r, "single node: local == global"
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert hvd.is_initialized() and hvd.mpi_built() and hvd.mpi_enabled()
    assert isinstance(hvd.mpi_threads_supported(), bool)
    assert hvd.nccl_built() == 0


def sc_idle_cpu():
    """With nothing in flight the engine's rounds slow down (20 ms apart after 20 idle ones):
    this process (engine and MPI; Python asleep) uses under 5 % of a core over 2 s. At the 1 ms
    cycle it was 20 % on a 2-core VM and 7 % on 16 quiet cores. The next op still runs."""
    import resource
    import time

    hvd.allreduce(np.ones(4, np.float32), name="idle.before")
    time.sleep(0.5)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    time.sleep(2.0)
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    share = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (t1 - t0)
    assert share < 0.05, f"rank {hvd.rank()}: an idle engine used {100 * share:.1f} % of a core"
    got = hvd.allreduce(np.ones(4, np.float32), op=hvd.Sum, name="idle.after")
    assert np.array_equal(got, np.full(4, hvd.size(), np.float32)), got


@manages_init
def sc_subcomm():
    """init(comm=...) with an mpi4py communicator: even and odd world ranks form two jobs."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    sub = world.Split(world.rank % 2, world.rank)
    hvd.init(comm=sub)
    assert hvd.size() == sub.size and hvd.rank() == sub.rank
    got = hvd.allreduce(np.array([world.rank], np.int64), op=hvd.Sum, name="sub")
    assert got[0] == sum(q for q in range(world.size) if q % 2 == world.rank % 2)


def sc_reinit_other_comm():
    """init(comm=other) while running on another communicator raises; the same one is a no-op."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    hvd.init(comm=world)  # congruent with the running engine's: fine
    sub = world.Split(world.rank % 2, world.rank)
    expect_error(lambda: hvd.init(comm=sub), ValueError, "already running", "communicator")
    assert hvd.size() == world.size
    assert (hvd.allreduce(np.ones(2), op=hvd.Sum, name="reinit/after") == world.size).all()


@manages_init
def sc_no_reinit_over_mpi():
    """init() after shutdown() over MPI refuses, saying why (a TCP world may re-form instead:
    test_tcp_reform.py); the process stays usable for everything but Horovod."""
    hvd.init()
    assert (hvd.allreduce(np.ones(2), op=hvd.Sum, name="once") == hvd.size()).all()
    hvd.shutdown()
    expect_error(hvd.init, ValueError, "shut down in this process", "MPI cannot be re-initialized")
    assert not hvd.is_initialized()


@manages_init
def sc_config_error():
    """Init must fail on this rank with every needle (argv[2:]) in the message."""
    try:
        hvd.init()
    except ValueError as e:
        msg = str(e)
        for needle in sys.argv[2:]:
            assert needle in msg, f"{msg!r} lacks {needle!r}"
        print(f"CONFIG ERROR {msg}")
    else:
        raise AssertionError("init() accepted the configuration")
    assert not hvd.is_initialized()
    expect_error(lambda: hvd.init(), ValueError, "failed to initialize")


@manages_init
def sc_log_rank():
    """A warning logged during init (MPI below MPI_THREAD_SERIALIZED) carries the rank."""
    import mpi4py

    mpi4py.rc.thread_level = "single"
    from mpi4py import MPI  # noqa: F401  (initializes MPI at the single thread level)

    hvd.init()
