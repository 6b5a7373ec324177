"""Topology, init on an mpi4py communicator, and the self-test entry point."""

from tests.support import mpi
from tests.support.mpi import ENGINE


def test_topology(world):
    ENGINE.run_ok(world, "topology")


def test_idle_engine_uses_little_cpu(world):
    ENGINE.run_ok(world, "idle_cpu")


def test_init_on_mpi4py_subcommunicator():
    ENGINE.run_ok(3, "subcomm")


def test_selftest_module(world):
    rc, out, err = mpi.launch(world, "-m", "horovod.selftest", timeout=120)
    assert rc == 0, out + err
    assert "FAIL" not in out and out.count("PASS") >= 6, out
