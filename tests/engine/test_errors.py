"""Bad input fails with a named error on every rank; a lost rank never hangs the others."""

import re

from tests.support import mpi
from tests.support.mpi import ENGINE


def test_mismatches_are_named_on_every_rank(world):
    ENGINE.run_ok(world, "mismatch")


def test_bad_alltoall_splits_fail_on_every_rank(world):
    ENGINE.run_ok(world, "alltoall_splits", timeout=60)


def test_gpu_tensor_in_a_cpu_build_is_refused_on_every_rank(world):
    ENGINE.run_ok(world, "gpu_claim", "this build of Horovod has no GPU operations")


def test_dtype_errors_reach_every_rank(world):
    """Issue 17, class 4: bool on one rank and uint8 on another is a named dtype mismatch for
    every op, and a bool reduction a named ValueError, on every rank; a dtype the engine lacks
    on one rank fails the others too. Before: NumPy bool (or complex) was refused on its own
    rank only, and the others waited until the launch's timeout."""
    ENGINE.run_ok(world, "dtypes", timeout=60)


def test_integer_scale_factors_scale_as_upstream(world):
    """Issue 42, class 4: prescale/postscale on an integer dtype scale in double and truncate,
    as upstream's own tests assert (issue 17 had refused them)."""
    ENGINE.run_ok(world, "int_scale", timeout=60)


def test_op_before_init_is_a_value_error():
    code = (
        "import numpy as np, horovod.numpy as hvd\n"
        "for f in (lambda: hvd.allreduce(np.ones(2)), hvd.rank, hvd.size):\n"
        "    try: f()\n"
        "    except ValueError as e: assert 'hvd.init()' in str(e), e\n"
        "    else: raise SystemExit('no error')\n"
        "print('fine')\n"
    )
    p = mpi.python(code, timeout=60)
    assert p.returncode == 0 and "fine" in p.stdout, p.stdout + p.stderr


def test_rank_that_exits_early_fails_the_others_with_its_name(world):
    ENGINE.run_ok(world, "early_exit", timeout=60)


def test_killed_rank_aborts_the_job(world):
    rc, out, err = ENGINE.launch(world, "killed", timeout=60)
    assert rc != 0
    text = out + err
    # Open MPI names the lost process as [[jobid,vpid],rank] and gives its exit code.
    assert re.search(r"\[\[\d+,\d+\],1\]", text) and "17" in text, text


def test_stopped_rank_is_named_and_the_job_ends(world):
    # A rank stopped inside a collective leaves its peers blocked in MPI, where no timeout can be
    # set; the watchdog must name it and, with a shutdown time, abort the job.
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    rc, out, err = ENGINE.launch(world, "stopped_rank", env=env, timeout=90)
    assert rc != 0, out + err
    blocked = [ln for ln in err.splitlines() if "has been blocked for" in ln]
    assert blocked, err
    assert any("RING_ALLREDUCE of tensor 'stop/big'" in ln and "rank 1" in ln for ln in blocked), (
        err
    )
    assert "Aborting the job" in err, err


def test_stopped_idle_rank_blocks_negotiation_and_the_job_ends(world):
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    rc, out, err = ENGINE.launch(world, "stopped_idle_rank", env=env, timeout=90)
    assert rc != 0, out + err
    assert "negotiation round" in err and "has been blocked for" in err, err
    assert "Aborting the job" in err, err
