"""Engine tests run real MPI ranks: each test launches `mpirun -np N python scenarios.py NAME`
and checks every rank's verdict. A hard timeout bounds every launch, so a hang fails the test
instead of stalling CI."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).with_name("scenarios.py")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
          "--mca", "btl_vader_single_copy_mechanism", "none"]


def launch(np_, scenario, *args, env=None, timeout=120, script=None):
    """Runs the scenario on np_ ranks; returns (returncode, stdout, stderr). `script`: another
    scenario file with the same protocol (default scenarios.py)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    cmd = (MPIRUN + ["-np", str(np_)] + [sys.executable, str(script or SCENARIOS), scenario] +
           list(args))
    try:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as ex:
        pytest.fail(f"{scenario} on {np_} ranks hung for more than {timeout} s:\n"
                    f"{ex.stdout}\n{ex.stderr}")
    return p.returncode, p.stdout, p.stderr


def run_ok(np_, scenario, *args, env=None, timeout=120, script=None):
    """Runs the scenario and asserts that every rank printed its OK line."""
    rc, out, err = launch(np_, scenario, *args, env=env, timeout=timeout, script=script)
    # mpirun may interleave ranks' lines, so look for the verdicts anywhere in the output.
    ranks = {int(r) for r in re.findall(rf"OK {re.escape(scenario)} rank=(\d+)", out)}
    assert rc == 0 and ranks == set(range(np_)), f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
    return out, err


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def world(request):
    return request.param
