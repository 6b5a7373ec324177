"""Regression tests of the engine hardening (issue 7): sizes from user input, knobs that ranks
must agree on, strict knob parsing, a watchdog that tells progress from blockage and names the
missing rank, linear negotiation of large groups, and smaller edge cases."""

import re

import pytest

from tests.support.mpi import ENGINE, ok_ranks

# -- 1. sizes from user input -------------------------------------------------------------------


def test_overflowing_sizes_fail_on_every_rank(world):
    # Before: splits [2**63-1, 2**63-1, 8] summed to 6, passed, then corrupted the heap (SIGABRT).
    ENGINE.run_ok(world, "size_overflow", timeout=60)


def test_invalid_arguments_on_one_rank_fail_every_rank():
    # The bad rank's reason reaches the others, which would otherwise wait for a stall timeout.
    ENGINE.run_ok(3, "size_overflow", timeout=60)


# -- 4. knobs that every rank must share --------------------------------------------------------


@pytest.mark.parametrize(
    "knob,values",
    [
        ("HOROVOD_CACHE_CAPACITY", ("1024", "64")),
        ("HOROVOD_RING_CHUNK_BYTES", ("1048576", "4096")),
        ("HOROVOD_SMALL_ALLREDUCE_BYTES", ("32768", "0")),
        ("HOROVOD_EAGER_ALLREDUCE_BYTES", ("16384", "0")),
        ("HOROVOD_FUSION_THRESHOLD", ("134217728", "0")),
        ("HOROVOD_CPU_OPERATIONS", ("ring", "mpi")),
    ],
)
def test_knob_set_differently_fails_init_on_every_rank(knob, values):
    # Before: MPI_ERR_TRUNCATE or a hang. Now every rank's init() names the knob and the values.
    envs = [{knob: values[0]}, {knob: values[1]}, {knob: values[0]}]
    rc, out, err = ENGINE.launch_per_rank(
        envs, "config_error", knob, "rank 1 has '" + values[1], "ranks [0, 2] have '" + values[0]
    )
    assert rc == 0 and ok_ranks(out, "config_error") == {0, 1, 2}, out + err


def test_bad_value_on_one_rank_fails_every_rank():
    envs = [{}, {"HOROVOD_CYCLE_TIME": "inf"}]
    rc, out, err = ENGINE.launch_per_rank(
        envs, "config_error", "rank 1", "HOROVOD_CYCLE_TIME='inf'"
    )
    assert rc == 0 and ok_ranks(out, "config_error") == {0, 1}, out + err


# -- 9. strict knob parsing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "knob,value,needle",
    [
        ("HOROVOD_STALL_CHECK_TIME_SECONDS", "1e13", "finite number in [0.1, 1e+06]"),
        ("HOROVOD_STALL_CHECK_TIME_SECONDS", "inf", "finite number"),
        ("HOROVOD_STALL_CHECK_TIME_SECONDS", "nan", "finite number"),
        ("HOROVOD_CYCLE_TIME", "inf", "finite number in [0, 1000]"),
        ("HOROVOD_CYCLE_TIME", "-1", "finite number in [0, 1000]"),
        ("HOROVOD_CACHE_CAPACITY", "100000000", "integer in [0, 1048576]"),
        ("HOROVOD_CACHE_CAPACITY", "1e8", "integer"),
        ("HOROVOD_CACHE_CAPACITY", "-5", "integer in [0, 1048576]"),
        ("HOROVOD_FUSION_THRESHOLD", "-1", "integer"),
        ("HOROVOD_FUSION_THRESHOLD", "99999999999999999999", "integer"),
        ("HOROVOD_RING_CHUNK_BYTES", "16", "integer in [64,"),
        ("HOROVOD_LOG_LEVEL", "bogus", "trace, debug, info, warning or error"),
        ("HOROVOD_STALL_CHECK_DISABLE", "maybe", "one of 1, 0"),
        ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "-3", "finite number"),
    ],
)
def test_bad_knob_value_is_named(knob, value, needle):
    p = ENGINE.run_single(
        "config_error", f"{knob}='{value}'", needle, env={knob: value}, timeout=60
    )
    assert p.returncode == 0 and "OK config_error" in p.stdout, p.stdout + p.stderr


def test_stall_shutdown_below_check_time_is_an_error():
    # Before: silently raised to the check time.
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "10", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    p = ENGINE.run_single(
        "config_error",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=3",
        "HOROVOD_STALL_CHECK_TIME_SECONDS=10",
        env=env,
        timeout=60,
    )
    assert p.returncode == 0 and "OK config_error" in p.stdout, p.stdout + p.stderr


# -- 5. the watchdog measures progress, not duration ---------------------------------------------

WATCH = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "0.5", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "1.5"}


def test_long_progressing_collective_is_not_aborted():
    # 64-byte ring chunks over TCP make one allreduce of 128 MiB run for seconds (9-15 s on
    # 2-core VMs) while data moves all along. Before: "has been blocked for 1 s ... Aborting the
    # job". 48 MiB took under the 2 s this needs once transfers kept pieces in flight. The
    # allgather's messages must land well within the 0.5 s check too: in 32 MiB messages the
    # first landed after 0.22-0.29 s on a 2-core VM, and CI's slower VM warned (test failed).
    # TCP over loopback only: with a compose cluster up, Open MPI also offers the host's bridge
    # addresses, which do not carry traffic between two host processes (MPI init then hangs).
    env = dict(
        WATCH,
        HOROVOD_RING_CHUNK_BYTES="64",
        OMPI_MCA_btl="tcp,self",
        OMPI_MCA_btl_tcp_if_include="lo",
    )
    out, err = ENGINE.run_ok(2, "long_op_progressing", str(32 << 20), env=env, timeout=180)
    elapsed = [float(t) for t in re.findall(r"ELAPSED rank=\d+ ([\d.]+)", out)]
    assert min(elapsed) > 1.5 + 0.5, f"the op ran {elapsed} s: too short to test the watchdog"
    assert "blocked" not in err, err


def test_large_group_negotiation_is_not_aborted():
    # Before: a 60k-tensor grouped_allreduce took seconds in one negotiation round (quadratic
    # caching) and the watchdog aborted it at the bounds. A round is one section: rank
    # 0's coordinating time is no progress for the others, so these bounds leave room for load.
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    ENGINE.run_ok(2, "many_tensors", "60000", env=env, timeout=120)


# -- 6. a stopped rank is named by the ranks blocked in a negotiation round ----------------------


def test_stopped_idle_rank_is_named(world):
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    rc, out, err = ENGINE.launch(world, "stopped_idle_rank", env=env, timeout=90)
    assert rc != 0, out + err
    lines = [ln for ln in err.splitlines() if "negotiation round" in ln and "blocked for" in ln]
    assert lines and all("waiting for rank 1 (silent" in ln for ln in lines), err
    if world == 3:  # the live peers say they wait in the same round
        assert any(re.search(r"rank [02] is blocked in it too", ln) for ln in lines), err
    assert "Aborting the job" in err, err


# -- 7. negotiation is linear in the number of tensors -------------------------------------------


def test_grouped_allreduce_scales_linearly():
    # A complexity check, not a timing target: twice the tensors must cost about twice the time
    # (before: 20k -> 40k tensors took 3.6x, 40k -> 100k 16x). Same run, same machine.
    # The faster of two runs of each: a busy moment on a shared two-core machine once made one
    # run 1.4x slower (6.6 against 6.5, with other jobs beside it; 4.2-5.8 alone).
    def seconds(count):
        out, _ = ENGINE.run_ok(2, "many_tensors", str(count), timeout=180)
        return max(float(t) for t in re.findall(r"ELAPSED rank=\d+ step=0 ([\d.]+)", out))

    small = min(seconds(25000), seconds(25000))
    large = min(seconds(100000), seconds(100000))
    assert large / small < 6.5, f"25k tensors {small:.2f} s, 100k {large:.2f} s: not linear"


# -- 10. smaller edge cases ----------------------------------------------------------------------


def test_zero_width_rows_keep_their_count(world):
    ENGINE.run_ok(world, "zero_width")


def test_integer_average_does_not_wrap(world):
    ENGINE.run_ok(world, "int_average")


def test_init_with_another_communicator_while_running_raises():
    ENGINE.run_ok(2, "reinit_other_comm")


def test_log_lines_carry_the_rank_from_init_on():
    out, err = ENGINE.run_ok(2, "log_rank")
    assert "rank -1" not in err, err
    assert re.search(r"\[horovod rank [01] WARNING\] MPI provides thread level", err), err
