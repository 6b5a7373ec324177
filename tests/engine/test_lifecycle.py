"""Topology, init on an mpi4py communicator, and the self-test entry point."""

import os
import sys

from tests.support import mpi
from tests.support.mpi import ENGINE, MPIRUN


def test_topology(world):
    ENGINE.run_ok(world, "topology")


def test_idle_engine_uses_little_cpu(world):
    ENGINE.run_ok(world, "idle_cpu")


def test_polls_yield_the_core_only_where_the_engine_shares_it():
    """A rank bound to one core (taskset; mpirun --bind-to none keeps the mask) shares it with
    the engine's thread: the engine's polls then yield the core (the training thread computes
    there); one rank with the machine's cores to itself polls without yielding."""
    code = "import horovod.numpy as hvd; hvd.init(); hvd.shutdown()"
    cases = [(["taskset", "-c", "0"], 1)]
    if len(os.sched_getaffinity(0)) >= 2:
        cases.append(([], 0))
    for pin, yields in cases:
        p = mpi.run(
            [*pin, *MPIRUN, "-np", "1", sys.executable, "-c", code],
            env={"HOROVOD_LOG_LEVEL": "debug"},
            what=f"init on 1 rank {' '.join(pin) or 'unbound'}",
        )
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"polls yield the core: {yields}" in p.stderr, p.stderr


def test_no_init_after_shutdown_over_mpi():
    ENGINE.run_ok(2, "no_reinit_over_mpi")


def test_init_on_mpi4py_subcommunicator():
    ENGINE.run_ok(3, "subcomm")


def test_selftest_module(world):
    rc, out, err = mpi.launch(world, "-m", "horovod.selftest", timeout=120)
    assert rc == 0, out + err
    assert "FAIL" not in out and out.count("PASS") >= 6, out
