"""horovodrun's flag errors: every bad value is argparse's usage error naming the flag (exit 2),
never a traceback. Knob flags are checked by the engine's own parser and bounds, so these
tests need the engine built (`make test/runner` builds it)."""

import subprocess
import sys

import pytest

from horovod.common import basics
from horovod.runner import launch


def usage_error(argv, capsys, env=None):
    """The error line of a usage error (after argparse's usage line)."""
    with pytest.raises(SystemExit) as e:
        launch.parse_args(argv + ["true"], env={} if env is None else env)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("usage: horovodrun") and len(lines) == 2, err
    return lines[-1]


@pytest.mark.parametrize(
    "value", ["abc", "inf", "-inf", "nan", "-1", "65536.5", "1e6", "1e400", ""]
)
def test_fusion_threshold_mb(value, capsys):
    # --flag=value: argparse takes a separate "-inf" for an option.
    line = usage_error([f"--fusion-threshold-mb={value}"], capsys)
    assert line.startswith(
        f"horovodrun: error: argument --fusion-threshold-mb: {value!r} is not "
        "valid: expected a number of MB in [0, 65536]"
    ), line


def test_fusion_threshold_mb_past_the_bound_quotes_the_engine(capsys):
    line = usage_error(["--fusion-threshold-mb", "-1"], capsys)
    assert line.endswith(f"({basics.check_knob('HOROVOD_FUSION_THRESHOLD', str(-(1 << 20)))})")
    assert "expected an integer in [0, 68719476736]" in line


@pytest.mark.parametrize(
    "flag,var,value",
    [
        ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", "abc"),
        ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", "inf"),
        ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", "nan"),
        ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", "-1"),
        ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", "1000.5"),
        ("--cache-capacity", "HOROVOD_CACHE_CAPACITY", "1e8"),
        ("--cache-capacity", "HOROVOD_CACHE_CAPACITY", "-5"),
        ("--cache-capacity", "HOROVOD_CACHE_CAPACITY", "2000000"),
        ("--stall-check-warning-time-seconds", "HOROVOD_STALL_CHECK_TIME_SECONDS", "0"),
        ("--stall-check-warning-time-seconds", "HOROVOD_STALL_CHECK_TIME_SECONDS", "nan"),
        ("--stall-check-shutdown-time-seconds", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "-3"),
        ("--stall-check-shutdown-time-seconds", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "2e6"),
        ("--log-level", "HOROVOD_LOG_LEVEL", "bogus"),
        ("--autotune-warmup-samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "-1"),
        ("--autotune-steps-per-sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "0"),
        ("--autotune-bayes-opt-max-samples", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "2.5"),
    ],
)
def test_knob_flags_are_checked_by_the_engine(flag, var, value, capsys):
    want = basics.check_knob(var, value)
    assert want.startswith(f"{var}='{value}' is not valid: expected ")
    assert usage_error([flag, value], capsys) == f"horovodrun: error: argument {flag}: {want}"


@pytest.mark.parametrize(
    "argv,var,want",
    [
        (["--fusion-threshold-mb", "0"], "HOROVOD_FUSION_THRESHOLD", "0"),
        (["--fusion-threshold-mb", "0.5"], "HOROVOD_FUSION_THRESHOLD", str(1 << 19)),
        (["--fusion-threshold-mb", "65536"], "HOROVOD_FUSION_THRESHOLD", str(64 << 30)),
        (["--cycle-time-ms", "1000"], "HOROVOD_CYCLE_TIME", "1000"),
        (["--log-level", "DEBUG"], "HOROVOD_LOG_LEVEL", "DEBUG"),  # the engine ignores case
        (["--timeline-filename", "/tmp/t.json"], "HOROVOD_TIMELINE", "/tmp/t.json"),
        (["--autotune-log-file", "/tmp/a.csv"], "HOROVOD_AUTOTUNE_LOG", "/tmp/a.csv"),
        (["--autotune-warmup-samples", "0"], "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0"),
        (["--autotune-steps-per-sample", "1"], "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "1"),
        (
            ["--autotune-bayes-opt-max-samples", "1000"],
            "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
            "1000",
        ),
        (["--autotune"], "HOROVOD_AUTOTUNE", "1"),
        (["--timeline-mark-cycles"], "HOROVOD_TIMELINE_MARK_CYCLES", "1"),
        (["--no-stall-check"], "HOROVOD_STALL_CHECK_DISABLE", "1"),
        (["--hierarchical-allreduce"], "HOROVOD_HIERARCHICAL_ALLREDUCE", "1"),
        (["--hierarchical-allgather"], "HOROVOD_HIERARCHICAL_ALLGATHER", "1"),
    ],
)
def test_knob_flags_at_their_bounds_pass(argv, var, want):
    args = launch.parse_args(argv + ["true"], env={})
    assert launch.knob_env(args, {})[var] == want


def test_every_knob_flag_sets_an_engine_knob():
    knobs = {k.env: k for k in basics.config_knobs()}
    assert {var for _, var, _ in launch.KNOB_FLAGS} <= set(knobs)
    for _, var, _ in launch.SWITCH_FLAGS:  # a switch sets "1": a bool, or a choice of "1"
        assert knobs[var].type == "bool" or "1" in knobs[var].choices, var


def test_switch_flags_leave_unset_knobs_alone():
    env = launch.knob_env(launch.parse_args(["true"], env={}), {"HOROVOD_AUTOTUNE": "0"})
    assert env["HOROVOD_AUTOTUNE"] == "0"
    assert "HOROVOD_TIMELINE_MARK_CYCLES" not in env and "HOROVOD_STALL_CHECK_DISABLE" not in env


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["--start-timeout", "nan"], "--start-timeout"),
        (["--start-timeout", "inf"], "--start-timeout"),
        (["--start-timeout", "0"], "--start-timeout"),
        (["--start-timeout", "abc"], "--start-timeout"),
        (["--check-network", "--check-seconds", "nan"], "--check-seconds"),
        (["--check-network", "--check-seconds", "-1"], "--check-seconds"),
        (["--check-network", "--check-step-timeout", "inf"], "--check-step-timeout"),
        (["--check-network", "--step-time-ms", "nan"], "--step-time-ms"),
        (["--check-network", "--model-bytes", "-5"], "--model-bytes"),
    ],
)
def test_numbers_must_be_positive_and_finite(argv, flag, capsys):
    with pytest.raises(SystemExit) as e:
        launch.parse_args(argv, env={})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"horovodrun: error: argument {flag}: {argv[-1]!r} is not valid: expected a positive"
        )
    )


def test_ssh_port_and_key_from_the_environment(capsys):
    """The Kubernetes chart's launcher sets them, so a user's command needs no -p/-i."""
    env = {"HOROVOD_SSH_PORT": "2345", "HOROVOD_SSH_IDENTITY_FILE": "/etc/horovod/ssh/id"}
    args = launch.parse_args(["true"], env=env)
    assert (args.ssh_port, args.ssh_identity_file) == (2345, "/etc/horovod/ssh/id")
    args = launch.parse_args(["-p", "22", "-i", "k", "true"], env=env)  # flags win
    assert (args.ssh_port, args.ssh_identity_file) == (22, "k")
    line = usage_error([], capsys, env={"HOROVOD_SSH_PORT": "ssh"})
    assert (
        line
        == "horovodrun: error: argument -p/--ssh-port: $HOROVOD_SSH_PORT='ssh' is not an integer"
    )


def test_start_timeout_from_the_environment(capsys):
    assert launch.parse_args(["true"], env={"HOROVOD_START_TIMEOUT": "12"}).start_timeout == 12
    assert launch.parse_args(["true"], env={}).start_timeout == launch.DEFAULT_START_TIMEOUT
    line = usage_error([], capsys, env={"HOROVOD_START_TIMEOUT": "abc"})
    assert line == (
        "horovodrun: error: argument --start-timeout: $HOROVOD_START_TIMEOUT='abc' "
        "is not valid: expected a positive number"
    )


def test_unbalanced_quote_in_mpi_args(capsys):
    line = usage_error(["--mpi-args", "--mca btl 'tcp,self"], capsys)
    assert line == (
        'horovodrun: error: argument --mpi-args: cannot split "--mca btl \'tcp,self" '
        "like a shell: No closing quotation"
    )


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"\xff\xfe\x00binary", "not a text file (byte 0xff at offset 0 is not UTF-8)"),
        (
            b"w1 slots=2\nw2\x00 slots=2\n",
            "line 2: unexpected control character in 'w2\\x00 slots=2'",
        ),
        (b"w1 slots=two\n", "line 1: slots must be a positive integer, got 'two'"),
        (b"# nobody\n", "no hosts"),
    ],
)
def test_bad_hostfile(tmp_path, capsys, content, needle):
    f = tmp_path / "hosts"
    f.write_bytes(content)
    line = usage_error(["--hostfile", str(f)], capsys)
    assert line.startswith(f"horovodrun: error: argument --hostfile: hostfile {f}")
    assert needle in line
    line = usage_error([], capsys, env={"HOROVOD_HOSTFILE": str(f)})
    assert line.startswith("horovodrun: error: argument --hostfile ($HOROVOD_HOSTFILE): ")


def test_unreadable_hostfile(tmp_path, capsys):
    # A directory: unreadable as a file even for root, who can read any mode-000 file.
    line = usage_error(["--hostfile", str(tmp_path)], capsys)
    assert line == f"horovodrun: error: argument --hostfile: hostfile {tmp_path}: Is a directory"
    line = usage_error(["--hostfile", str(tmp_path / "missing")], capsys)
    assert line.endswith("No such file or directory")


def test_tab_separated_hostfile_is_fine(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("w1\tslots=2\n")
    assert launch.parse_args(["--hostfile", str(f), "true"], env={}).host_list == [("w1", 2)]


def test_bad_host_list_names_the_flag(capsys):
    line = usage_error(["-H", "a:0"], capsys)
    assert line == (
        "horovodrun: error: argument -H/--hosts: -H entry 'a:0': slots must be a "
        "positive integer, got '0'"
    )
    line = usage_error([], capsys, env={"HOROVOD_HOSTS": "a:x"})
    assert line.startswith("horovodrun: error: argument -H/--hosts ($HOROVOD_HOSTS): ")


def test_horovodrun_prints_no_traceback():
    # The whole program, as the console script runs it.
    p = subprocess.run(
        [sys.executable, "-m", "horovod.runner.launch", "--fusion-threshold-mb", "abc", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert (
        p.stderr.strip()
        .splitlines()[-1]
        .startswith("horovodrun: error: argument --fusion-threshold-mb: 'abc' is not valid")
    )


@pytest.mark.parametrize("model", ["NoSuchNet", "resnet", "decode_predictions"])
def test_unknown_keras_model(model, capsys):
    pytest.importorskip("keras")
    with pytest.raises(SystemExit) as e:
        launch.parse_args(["--check-network", "--model", model], env={})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"horovodrun: error: argument --model: keras.applications has no model {model!r} "
        "(e.g. ResNet50, MobileNetV2, EfficientNetB0)"
    )
