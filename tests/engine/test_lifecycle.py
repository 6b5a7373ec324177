"""Topology, init on an mpi4py communicator, and the self-test entry point."""
import os
import subprocess
import sys

from conftest import MPIRUN, ROOT, run_ok


def test_topology(world):
    run_ok(world, "topology")


def test_init_on_mpi4py_subcommunicator():
    run_ok(3, "subcomm")


def test_selftest_module(world):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(MPIRUN + ["-np", str(world), sys.executable, "-m", "horovod.selftest"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "FAIL" not in p.stdout and p.stdout.count("PASS") >= 6, p.stdout
