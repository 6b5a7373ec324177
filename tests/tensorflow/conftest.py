"""TensorFlow tests run real MPI ranks: each test launches `mpirun -np N python <script> NAME`
and checks every rank's verdict ("OK <NAME> rank=<r>"). A hard timeout bounds every launch, so
a hang fails the test instead of stalling CI.

`script` selects the scenario file (default scenarios_ops.py), so every test file here can
bring its own. Importing TF costs seconds per rank, so run_batch() runs several scenarios in one
launch ("a,b,c"; see Batch) and each test checks its own scenario's verdicts. TF's log noise is
off and its thread pools are small by default: several ranks share a few cores.
"""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCENARIOS = HERE / "scenarios_ops.py"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
          "--mca", "btl_vader_single_copy_mechanism", "none"]
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1",
          "TF_NUM_INTEROP_THREADS": "2", "OMP_NUM_THREADS": "1"}


def environment(env=None):
    """The ranks' environment: ours, the source tree first on PYTHONPATH, TF_ENV, then `env`."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(TF_ENV)
    e.update(env or {})
    return e


def launch(np_, scenario, *args, env=None, timeout=180, script=None):
    """Runs the scenario on np_ ranks; returns (returncode, stdout, stderr)."""
    cmd = (MPIRUN + ["-np", str(np_), sys.executable, str(script or SCENARIOS), scenario] +
           [str(a) for a in args])
    try:
        p = subprocess.run(cmd, env=environment(env), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as ex:
        pytest.fail(f"{scenario} on {np_} ranks hung for more than {timeout} s:\n"
                    f"{ex.stdout}\n{ex.stderr}")
    return p.returncode, p.stdout, p.stderr


def run_ok(np_, scenario, *args, env=None, timeout=180, script=None):
    """Runs the scenario and asserts that every rank printed its OK line."""
    rc, out, err = launch(np_, scenario, *args, env=env, timeout=timeout, script=script)
    # mpirun may interleave ranks' lines, so look for the verdicts anywhere in the output.
    ranks = {int(r) for r in re.findall(rf"OK {re.escape(scenario)} rank=(\d+)", out)}
    assert rc == 0 and ranks == set(range(np_)), f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
    return out, err


class Batch:
    """The outcome of one launch that ran several scenarios in one process per rank (scenario
    files here accept "a,b,c": TF's import costs seconds per rank, so tests share launches).
    A script prints "OK <name> rank=<r>" after each scenario and, on the first failure,
    "FAIL <name> rank=<r>" with the traceback, then exits: the later scenarios do not run."""

    def __init__(self, np_, names, rc, out, err, seconds):
        self.np, self.names, self.rc, self.out, self.err = np_, names, rc, out, err
        self.seconds = seconds

    def passed(self, name):
        ranks = {int(r) for r in re.findall(rf"OK {re.escape(name)} rank=(\d+)", self.out)}
        return ranks == set(range(self.np))

    def check(self, name):
        """Fails the calling test unless every rank passed `name`, saying why."""
        assert name in self.names, f"{name} is not in this batch"
        if self.passed(name):
            return
        failed = [n for n in self.names if not self.passed(n)]
        first = failed[0]
        why = (f"{name} did not run: {first} failed before it" if first != name else
               f"{name} failed on {self.np} ranks")
        # The failing ranks' reports: from "FAIL" to the next verdict line.
        reports = re.findall(rf"(FAIL {re.escape(first)} rank=.*?)(?=^OK |^FAIL |\Z)",
                             self.out, re.S | re.M)
        pytest.fail(f"{why} (rc={self.rc}, {self.seconds:.0f} s)\n" +
                    ("\n".join(reports) or f"stdout:\n{self.out[-6000:]}") +
                    f"\nstderr (end):\n{self.err[-3000:]}", pytrace=False)


def run_batch(np_, names, env=None, timeout=300, script=None):
    """One launch of scenarios `names` (in order, one process per rank); returns a Batch."""
    start = time.monotonic()
    rc, out, err = launch(np_, ",".join(names), env=env, timeout=timeout, script=script)
    return Batch(np_, list(names), rc, out, err, time.monotonic() - start)


def run_python(code, env=None, timeout=120):
    """Runs `code` in one plain Python process (no mpirun); returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-c", code], env=environment(env),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def world(request):
    return request.param
