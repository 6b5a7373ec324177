"""horovodrun's flags: upstream's names, in groups (hosts and ssh, engine knobs, controller,
--check-network, elastic), and parse_args, which checks them together and fills in what the
environment sets (a cluster's launcher sets HOROVOD_HOSTS, HOROVOD_SSH_PORT, ...) so that every
bad value is argparse's usage error naming the flag, never a traceback."""

import argparse
import math
import os
import shlex

from horovod.runner import hosts as hostlib
from horovod.runner.network_check_plan import model_bytes

# Flags that set an engine knob: (flag, HOROVOD_* variable, unit) where unit is None when the
# flag takes the knob's own value, else (knob units per flag unit, name).  The variables work
# too.  parse_args checks each value with the engine's own parser and bounds.
KNOB_FLAGS = [
    ("--fusion-threshold-mb", "HOROVOD_FUSION_THRESHOLD", (1 << 20, "MB")),
    ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", None),
    ("--cache-capacity", "HOROVOD_CACHE_CAPACITY", None),
    ("--timeline-filename", "HOROVOD_TIMELINE", None),
    ("--stall-check-warning-time-seconds", "HOROVOD_STALL_CHECK_TIME_SECONDS", None),
    ("--stall-check-shutdown-time-seconds", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", None),
    ("--log-level", "HOROVOD_LOG_LEVEL", None),
    ("--autotune-log-file", "HOROVOD_AUTOTUNE_LOG", None),
    ("--autotune-warmup-samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", None),
    ("--autotune-steps-per-sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", None),
    ("--autotune-bayes-opt-max-samples", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", None),
]
# Flags without a value that turn a boolean knob on: (flag, HOROVOD_* variable, help).
SWITCH_FLAGS = [
    ("--no-stall-check", "HOROVOD_STALL_CHECK_DISABLE", "turn the stall check off"),
    (
        "--autotune",
        "HOROVOD_AUTOTUNE",
        "tune the fusion threshold and cycle time while the job runs (a knob set "
        "explicitly is held at its value)",
    ),
    (
        "--hierarchical-allreduce",
        "HOROVOD_HIERARCHICAL_ALLREDUCE",
        "two-level allreduce wherever the hosts hold the same number of ranks (default: auto, "
        "on with several hosts of several ranks each)",
    ),
    (
        "--hierarchical-allgather",
        "HOROVOD_HIERARCHICAL_ALLGATHER",
        "two-level allgather wherever the hosts hold the same number of ranks (default: auto)",
    ),
    (
        "--timeline-mark-cycles",
        "HOROVOD_TIMELINE_MARK_CYCLES",
        "mark each negotiation round that ran ops in the timeline",
    ),
]
DEFAULT_START_TIMEOUT = 30.0


def _positive(text):
    """argparse type: a finite number > 0 (float() alone accepts nan, inf and negatives)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: expected a positive number")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: expected a positive integer")
    return value


def _knob_value(var, unit, text):
    """(the HOROVOD_* value for a knob flag's text, None) or (None, why it is not valid), with
    the engine's parser and bounds."""
    try:
        from horovod.common import basics

        knob = next(k for k in basics.config_knobs() if k.env == var)
    except (ImportError, OSError) as e:  # not built, or libmpi missing: nothing to check with
        return None, (
            f"cannot be checked: the engine is not importable ({type(e).__name__}: "
            f"{e}); see horovodrun --check-build"
        )
    if unit is None:
        error = basics.check_knob(var, text)
        return (None, error) if error else (text, None)
    # The flag is in larger units (MB): say the range in them, then the engine's own words.
    scale, name = unit
    expected = f"expected a number of {name} in [{knob.min / scale:g}, {knob.max / scale:g}]"
    try:
        value = float(text)
        value = str(int(value * scale)) if math.isfinite(value) else None
    except ValueError:
        value = None
    if value is None:
        return None, f"{text!r} is not valid: {expected}"
    error = basics.check_knob(var, value)
    return (None, f"{text!r} is not valid: {expected} ({error})") if error else (value, None)


# -- the parser, group by group (the order of the calls is the order --help lists them in) ------
def build_parser():
    p = argparse.ArgumentParser(
        prog="horovodrun",
        description="Run a Horovod training script on N processes, on this host or across "
        "hosts over ssh (after a preflight of every host), through mpirun or (--gloo) over TCP.",
        usage="horovodrun [-np N] [-H host:slots,... | --hostfile FILE] [options] command "
        "[args ...]  |  horovodrun --check-build",
    )
    _add_host_flags(p)
    _add_knob_flags(p)
    _add_check_flags(p.add_argument_group("network check (--check-network)"))
    _add_elastic_flags(
        p.add_argument_group("elastic training (ranks come and go; hvd.elastic.run in the script)")
    )
    p.add_argument("--mpi-args", default="", help="extra mpirun arguments, one quoted string")
    p.add_argument("--mpirun", help="mpirun executable (default: mpirun)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="program and its arguments")
    return p


def _add_host_flags(p):
    """Where the ranks run and how horovodrun reaches the hosts; what it only reports."""
    p.add_argument(
        "-np",
        "--num-proc",
        type=int,
        dest="np",
        help="number of processes (default: the hosts' slots, or this host's CPUs)",
    )
    p.add_argument(
        "-H",
        "--hosts",
        help="hosts and their slots, e.g. w1:2,w2:2 (default: $HOROVOD_HOSTS, else this host)",
    )
    p.add_argument("--hostfile", help="file of 'host slots=N' lines (default: $HOROVOD_HOSTFILE)")
    p.add_argument(
        "-p", "--ssh-port", type=int, help="sshd port of every host (default: $HOROVOD_SSH_PORT)"
    )
    p.add_argument(
        "-i",
        "--ssh-identity-file",
        help="ssh private key to log in with (default: $HOROVOD_SSH_IDENTITY_FILE)",
    )
    p.add_argument(
        "--network-interface",
        dest="nics",
        help="interface name(s) or subnet(s) the ranks talk over, comma-separated "
        "(default: detected: the subnet every host shares, never lo or docker0)",
    )
    p.add_argument(
        "--start-timeout",
        type=_positive,
        help="bound in seconds on the preflight of all hosts (default: "
        f"$HOROVOD_START_TIMEOUT, else {DEFAULT_START_TIMEOUT:g})",
    )
    p.add_argument(
        "--check-build",
        action="store_true",
        help="print versions and what this build supports, then exit",
    )
    p.add_argument(
        "--verbose", action="store_true", help="print the preflight's report and the mpirun command"
    )


def _add_knob_flags(p):
    """The engine's knobs (KNOB_FLAGS, SWITCH_FLAGS) and the controller (--mpi, --gloo)."""
    for flag, var, _ in KNOB_FLAGS:
        p.add_argument(flag, dest=var, help=f"sets {var}")
    for flag, var, what in SWITCH_FLAGS:
        p.add_argument(flag, dest=var, action="store_true", help=f"{what}: sets {var}=1")
    p.add_argument(
        "--mpi",
        action="store_true",
        help="use MPI (the default controller; accepted for upstream command lines)",
    )
    p.add_argument(
        "--gloo",
        "--tcp",
        action="store_true",
        help="start the ranks without mpirun (here, or over ssh) and form the job over TCP",
    )


def _add_check_flags(check):
    check.add_argument(
        "--check-network",
        action="store_true",
        help="measure the hosts' network (latency and bandwidth per host pair, "
        "allreduce, interfaces) with one rank per slot, print a report, exit",
    )
    check.add_argument(
        "--check-seconds",
        type=_positive,
        default=0.5,
        help="length of each bandwidth measurement (default: %(default)s)",
    )
    check.add_argument(
        "--check-step-timeout",
        type=_positive,
        default=10.0,
        help="bound on each measurement step; a host that does not answer within "
        "it is named and the check ends (default: %(default)s)",
    )
    check.add_argument(
        "--model-bytes",
        type=_positive_int,
        help="predict the allreduce time per step of a model with this many bytes of gradients",
    )
    check.add_argument(
        "--model",
        help="the same for a keras.applications model, e.g. ResNet50 (float32 parameters)",
    )
    check.add_argument(
        "--step-time-ms",
        type=_positive,
        help="one rank's compute time per step, for the scaling efficiency bound",
    )


def _add_elastic_flags(elastic):
    elastic.add_argument(
        "--host-discovery-script",
        help="program printing the available hosts, one 'host:slots' (or 'host') per line; run "
        "again every second while the job runs. Turns elastic mode on",
    )
    elastic.add_argument(
        "--min-np", type=_positive_int, help="fewest processes to run with (default: -np)"
    )
    elastic.add_argument(
        "--max-np", type=_positive_int, help="most processes to grow to (default: no limit)"
    )
    elastic.add_argument(
        "--slots-per-host",
        "--slots",
        dest="slots_per_host",
        type=_positive_int,
        default=1,
        help="slots of a host the discovery script lists without a count (default: %(default)s)",
    )
    elastic.add_argument(
        "--elastic-timeout",
        type=_positive,
        default=600.0,
        help="seconds to wait for at least --min-np slots before ending (default: %(default)s)",
    )
    elastic.add_argument(
        "--reset-limit",
        type=_positive_int,
        help="end the job after this many resets (default: no limit)",
    )
    elastic.add_argument(
        "--blacklist-cooldown-range",
        nargs=2,
        type=_positive,
        metavar=("MIN", "MAX"),
        help="seconds (random in [MIN, MAX]) before a failed host may be used again "
        "(default: never again in this job)",
    )


# -- the flags together, and what the environment fills in ---------------------------------------
def parse_args(argv, env=os.environ):
    p = build_parser()
    args = p.parse_args(argv)
    if args.check_build:
        return args
    _check_command(p, args)
    _check_elastic(p, args)
    _read_start_timeout(p, args, env)
    _check_knobs(p, args)
    try:
        shlex.split(args.mpi_args)
    except ValueError as e:  # mpirun_command splits it again, knowing it can
        p.error(f"argument --mpi-args: cannot split {args.mpi_args!r} like a shell: {e}")
    _read_ssh(p, args, env)
    if args.host_discovery_script:  # the hosts come from the script, generation by generation
        args.host_list = None
        return args
    _read_hosts(p, args, env)
    return args


def _check_command(p, args):
    """The controller's flags, the command (--check-network's own), -np, one host list."""
    if args.gloo:
        from horovod.runner import gloo_launch

        gloo_launch.check_args(p, args)
    args.mpirun = args.mpirun or "mpirun"
    if args.check_network:
        if args.command:
            p.error("--check-network runs its own program; give no command")
        args.command = ["python", "-m", "horovod.runner.task.network_check"]
        if args.model and not args.model_bytes:
            try:
                args.model_bytes = model_bytes(args)
            except ValueError as e:
                p.error(f"argument --model: {e}")
    if not args.command:
        p.error("a command is required (e.g. horovodrun -np 2 python train.py)")
    if args.np is not None and args.np < 1:
        p.error("-np must be at least 1")
    if args.hosts and args.hostfile:
        p.error("give -H/--hosts or --hostfile, not both")


def _check_elastic(p, args):
    """The elastic flags: only with a discovery script, and consistent with each other."""
    if not args.host_discovery_script:
        if args.min_np or args.max_np or args.reset_limit or args.blacklist_cooldown_range:
            p.error(
                "--min-np, --max-np, --reset-limit and --blacklist-cooldown-range need "
                "--host-discovery-script (elastic mode)"
            )
        return
    if args.hosts or args.hostfile:
        p.error("give --host-discovery-script or -H/--hostfile, not both")
    if args.check_network:
        p.error("--check-network measures a fixed set of hosts; give -H, not a discovery script")
    args.min_np = args.min_np or args.np or 1
    if args.max_np is not None and args.max_np < args.min_np:
        p.error(f"--max-np {args.max_np} is below --min-np {args.min_np}")
    if args.np is not None and not (args.min_np <= args.np <= (args.max_np or args.np)):
        p.error(f"-np {args.np} is outside [--min-np, --max-np]")
    if args.blacklist_cooldown_range and (
        args.blacklist_cooldown_range[0] > args.blacklist_cooldown_range[1]
    ):
        p.error("--blacklist-cooldown-range: MIN is above MAX")


def _read_start_timeout(p, args, env):
    if args.start_timeout is None:
        # Read here rather than as argparse's default, so that a bad value is a usage error.
        text = env.get("HOROVOD_START_TIMEOUT")
        try:
            args.start_timeout = DEFAULT_START_TIMEOUT if text is None else _positive(text)
        except argparse.ArgumentTypeError as e:
            p.error(f"argument --start-timeout: $HOROVOD_START_TIMEOUT={e}")


def _check_knobs(p, args):
    """Each knob flag's value, checked and converted by the engine (MB to bytes)."""
    for flag, var, unit in KNOB_FLAGS:
        text = getattr(args, var)
        if text is not None:
            value, error = _knob_value(var, unit, text)
            if error:
                p.error(f"argument {flag}: {error}")
            setattr(args, var, value)


def _read_ssh(p, args, env):
    # A cluster's launcher (the Kubernetes chart) sets these, so a user's command needs no flags.
    if args.ssh_port is None and env.get("HOROVOD_SSH_PORT"):
        try:
            args.ssh_port = int(env["HOROVOD_SSH_PORT"])
        except ValueError:
            p.error(
                "argument -p/--ssh-port: "
                f"$HOROVOD_SSH_PORT={env['HOROVOD_SSH_PORT']!r} is not an integer"
            )
    if args.ssh_identity_file is None:
        args.ssh_identity_file = env.get("HOROVOD_SSH_IDENTITY_FILE") or None


def _read_hosts(p, args, env):
    """args.host_list from -H, --hostfile or their variables; a bad list names its source."""
    if args.hosts or args.hostfile:
        host_flag = "-H/--hosts" if args.hosts else "--hostfile"
    else:
        args.hosts = env.get("HOROVOD_HOSTS") or None
        args.hostfile = None if args.hosts else env.get("HOROVOD_HOSTFILE") or None
        host_flag = (
            "-H/--hosts ($HOROVOD_HOSTS)" if args.hosts else "--hostfile ($HOROVOD_HOSTFILE)"
        )
    try:
        args.host_list = resolve_hosts(args)
    except hostlib.HostError as e:
        p.error(f"argument {host_flag}: {e}")


def resolve_hosts(args):
    """[(host, slots)] or None for 'this host only'.  Raises hostlib.HostError."""
    if args.hostfile:
        return hostlib.parse_hostfile(args.hostfile)
    if args.hosts:
        return hostlib.parse_hosts(args.hosts)
    return None


def knob_env(args, env):
    """env plus the HOROVOD_* variables the knob flags set (flags win over the environment);
    parse_args has converted and checked their values."""
    out = dict(env)
    for _, var, _ in KNOB_FLAGS:
        value = getattr(args, var)
        if value is not None:
            out[var] = value
    for _, var, _ in SWITCH_FLAGS:
        if getattr(args, var):
            out[var] = "1"
    return out
