"""horovodrun: `horovodrun -np 4 -H a:2,b:2 python train.py` runs mpirun with the flags Horovod
needs, after a preflight of every host.

Upstream's flag names, so upstream command lines work.  On this host alone (no -H/--hostfile,
or only localhost) nothing goes through ssh.  With remote hosts, preflight.run() asks every host
first and nothing is launched unless all of them pass.  The mpirun command is built by a pure
function (mpirun_command) so it can be tested without MPI; main() returns the job's exit code.
"""

import argparse
import json
import math
import os
import shlex
import sys

from horovod.runner import hosts as hostlib
from horovod.runner import links, oversubscription, probe
from horovod.runner.inherited import FORWARD_NAMES, FORWARD_PREFIXES, forwarded, usable_cpus  # noqa: F401
from horovod.runner.supervise import _say, _stuck_message, run  # noqa: F401  (_stuck_message: tests)

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


def parse_args(argv, env=os.environ):
    p = argparse.ArgumentParser(
        prog="horovodrun",
        description="Run a Horovod training script on N processes, on this host or across "
        "hosts over ssh (after a preflight of every host), through mpirun or (--gloo) over TCP.",
        usage="horovodrun [-np N] [-H host:slots,... | --hostfile FILE] [options] command "
        "[args ...]  |  horovodrun --check-build",
    )
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
    check = p.add_argument_group("network check (--check-network)")
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
    elastic = p.add_argument_group(
        "elastic training (ranks come and go; hvd.elastic.run in the script)"
    )
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
    p.add_argument("--mpi-args", default="", help="extra mpirun arguments, one quoted string")
    p.add_argument("--mpirun", help="mpirun executable (default: mpirun)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="program and its arguments")
    args = p.parse_args(argv)
    if args.check_build:
        return args
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
    if args.host_discovery_script:
        if args.hosts or args.hostfile:
            p.error("give --host-discovery-script or -H/--hostfile, not both")
        if args.check_network:
            p.error(
                "--check-network measures a fixed set of hosts; give -H, not a discovery script"
            )
        args.min_np = args.min_np or args.np or 1
        if args.max_np is not None and args.max_np < args.min_np:
            p.error(f"--max-np {args.max_np} is below --min-np {args.min_np}")
        if args.np is not None and not (args.min_np <= args.np <= (args.max_np or args.np)):
            p.error(f"-np {args.np} is outside [--min-np, --max-np]")
        if args.blacklist_cooldown_range and (
            args.blacklist_cooldown_range[0] > args.blacklist_cooldown_range[1]
        ):
            p.error("--blacklist-cooldown-range: MIN is above MAX")
    elif args.min_np or args.max_np or args.reset_limit or args.blacklist_cooldown_range:
        p.error(
            "--min-np, --max-np, --reset-limit and --blacklist-cooldown-range need "
            "--host-discovery-script (elastic mode)"
        )
    if args.start_timeout is None:
        # Read here rather than as argparse's default, so that a bad value is a usage error.
        text = env.get("HOROVOD_START_TIMEOUT")
        try:
            args.start_timeout = DEFAULT_START_TIMEOUT if text is None else _positive(text)
        except argparse.ArgumentTypeError as e:
            p.error(f"argument --start-timeout: $HOROVOD_START_TIMEOUT={e}")
    for flag, var, unit in KNOB_FLAGS:
        text = getattr(args, var)
        if text is not None:
            value, error = _knob_value(var, unit, text)
            if error:
                p.error(f"argument {flag}: {error}")
            setattr(args, var, value)
    try:
        shlex.split(args.mpi_args)
    except ValueError as e:  # mpirun_command splits it again, knowing it can
        p.error(f"argument --mpi-args: cannot split {args.mpi_args!r} like a shell: {e}")
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
    if args.host_discovery_script:  # the hosts come from the script, generation by generation
        args.host_list = None
        return args
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
    return args


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


def mpirun_command(args, env, cpus, is_root, hosts=None, network_args=(), ssh_args=()):
    """The mpirun command line.  hosts: [(host, slots)] or None (this host only)."""
    if hosts:
        total = sum(s for _, s in hosts)
        np_ = args.np or total
    else:
        np_ = args.np or cpus
    cmd = [args.mpirun]
    if is_root:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(np_)]
    if hosts:
        cmd += ["-H", hostlib.format_hosts(hosts)]
    cmd += ["--bind-to", "none", "--map-by", "slot"]
    if (hosts is None and np_ > cpus) or (hosts and np_ > total):
        cmd.append("--oversubscribe")
    if ssh_args:
        # mpirun starts its daemon on each host with these; each daemon is started from here
        # (no tree spawn), so the key is needed on the launcher only.
        cmd += [
            "--mca",
            "plm_rsh_args",
            shlex.join(ssh_args),
            "--mca",
            "plm_rsh_no_tree_spawn",
            "1",
        ]
    cmd += list(network_args)
    for name in forwarded(env):
        cmd += ["-x", name]
    cmd += shlex.split(args.mpi_args)
    return cmd + list(args.command)


def rank_hosts(hosts, np_):
    """rank -> host under --map-by slot (each host's slots filled in turn); {} if unknown."""
    if not hosts or np_ > sum(s for _, s in hosts):
        return {}
    placement = [h for h, s in hosts for _ in range(s)]
    return dict(enumerate(placement[:np_]))


def model_bytes(args):
    """Gradient bytes to predict for: --model-bytes, or a keras.applications model's float32
    parameters (built without weights: nothing is downloaded)."""
    if args.model_bytes:
        return args.model_bytes
    if not args.model:
        return None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import keras
    except ImportError as e:
        raise ValueError(f"needs Keras, which is not importable ({e})") from None
    build = getattr(keras.applications, args.model, None)
    error = (
        f"keras.applications has no model {args.model!r} (e.g. ResNet50, MobileNetV2, "
        "EfficientNetB0)"
    )
    if not callable(build):  # missing, or a submodule such as 'resnet'
        raise ValueError(error)
    try:
        return int(build(weights=None).count_params()) * 4
    except (TypeError, ValueError):  # a helper such as 'decode_predictions'
        raise ValueError(error) from None


def check_bound(plan):
    """Seconds the whole check may take: every step at its bound, plus start-up."""
    hosts = set(plan["placement"].values())
    pairs = len(hosts) * (len(hosts) + 1) // 2
    steps = 3 * pairs + 3 + len(plan["subnets"]) * len(hosts)
    return 60.0 + steps * (plan["step_timeout"] + 2 * plan["seconds"])


def check_plan(args, hosts, probes, choice):
    """What every rank of --check-network needs: where each rank runs, the subnets to compare."""
    from horovod.runner import network

    hosts = hosts or [("localhost", args.np or usable_cpus())]
    np_ = args.np or sum(s for _, s in hosts)
    placement = rank_hosts(hosts, np_) or {r: "localhost" for r in range(np_)}
    return {
        "placement": {str(r): h for r, h in placement.items()},
        "network": choice.mpi_value() if choice else "this host",
        "interface": "/".join(choice.names()) if choice else "shared memory",
        "subnets": {
            net: {h: list(m) for h, m in members.items()}
            for net, members in network.shared_subnets(probes).items()
        }
        if probes
        else {},
        # The hosts whose /dev/shm is small (probe.SMALL_SHM), a cause the report can name.
        "small_shm": {
            h: p["shm_bytes"]
            for h, p in (probes or {}).items()
            if p.get("shm_bytes") is not None and p["shm_bytes"] < probe.SMALL_SHM
        },
        "seconds": args.check_seconds,
        "step_timeout": args.check_step_timeout,
        "model_bytes": model_bytes(args),
        "step_time_ms": args.step_time_ms,
    }


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check_build:
        from horovod.runner.check_build import check_build

        return check_build()
    env = knob_env(args, os.environ)
    job = launch_job
    if args.gloo:
        from horovod.runner import gloo_launch

        job = gloo_launch.launch_job
    if args.host_discovery_script:
        from horovod.runner import elastic_driver

        return elastic_driver.run(args, env, job)
    return job(args, env, args.host_list)


def _oversubscribed(args, hosts, probes):
    """The machines whose cores this job's ranks outnumber (oversubscription.find), said."""
    per_host = {}
    for h in rank_hosts(hosts, args.np or sum(s for _, s in hosts)).values():
        per_host[h] = per_host.get(h, 0) + 1
    crowded = oversubscription.find(probes, per_host)
    if crowded:
        user_set = "mpi_yield_when_idle" in (args.mpi_args or "")
        _say(oversubscription.describe(crowded, user_set))
    return crowded


def launch_job(args, env, hosts, report=None):
    """Preflight (remote hosts), then mpirun on `hosts` ([(host, slots)] or None: this host);
    returns the job's exit status (3: the preflight failed, nothing was launched). `report`:
    see supervise.run."""
    remote = any(not hostlib.is_local(h) for h, _ in hosts or [])  # ssh, preflight, links
    if args.check_network and not remote:
        args.command[0] = sys.executable  # this host: the interpreter running horovodrun
    network_args, ssh_args = [], []
    if hosts:
        total = sum(s for _, s in hosts)
        if args.np and args.np > total:
            _say(
                f"horovodrun: -np {args.np} but the hosts have {total} slots "
                f"({hostlib.format_hosts(hosts)}); give fewer processes or more slots"
            )
            return 2
        if remote:
            from horovod.runner import preflight

            ssh_args = preflight.ssh_base(
                args.ssh_port, args.ssh_identity_file, min(10.0, args.start_timeout)
            )
            local = {h: hostlib.is_local(h) for h, _ in hosts}
            try:
                reports, choice, text = preflight.run(
                    hosts, local, ssh_args, args.start_timeout, args.nics
                )
            except preflight.PreflightFailed as e:
                _say(str(e))
                if report is not None:
                    report["preflight_failed"] = True
                return 3
            _say(text)
            network_args = choice.mpirun_args()
            crowded = _oversubscribed(args, hosts, {r.host: r.probe for r in reports})
            network_args += oversubscription.mpirun_args(crowded, args.mpi_args)
            if args.check_network:
                plan = check_plan(args, hosts, {r.host: r.probe for r in reports}, choice)
                plan["oversubscribed"] = (
                    oversubscription.describe(crowded, "mpi_yield_when_idle" in args.mpi_args)
                    if crowded
                    else None
                )
                env["HOROVOD_NETWORK_CHECK_PLAN"] = json.dumps(plan)
    if remote and not args.check_network and "HOROVOD_LINK_GBPS" not in env:
        known = links.load(hosts)
        if known:
            env["HOROVOD_LINK_GBPS"] = f"{known['slowest_gbps']:g}"
            if links.at_once(known):
                env.setdefault("HOROVOD_LINK_AT_ONCE_GBPS", f"{links.at_once(known):g}")
            _say(links.describe(known))
    if args.check_network and "HOROVOD_NETWORK_CHECK_PLAN" not in env:
        env["HOROVOD_NETWORK_CHECK_PLAN"] = json.dumps(check_plan(args, hosts, None, None))
    if not network_args and args.nics:
        network_args = [
            "--mca",
            "btl_tcp_if_include",
            args.nics,
            "--mca",
            "oob_tcp_if_include",
            args.nics,
        ]
    cmd = mpirun_command(args, env, usable_cpus(), os.geteuid() == 0, hosts, network_args, ssh_args)
    if args.verbose:
        _say(shlex.join(cmd))
    try:
        np_ = int(cmd[cmd.index("-np") + 1])
        bound = (
            check_bound(json.loads(env["HOROVOD_NETWORK_CHECK_PLAN"]))
            if args.check_network
            else None
        )
        report = {} if report is None else report
        rc = run(cmd, env, rank_hosts(hosts, np_), bound, "the network check", report)
        if args.check_network and rc == 0 and remote and report.get("slowest_link_gbps"):
            plan = json.loads(env["HOROVOD_NETWORK_CHECK_PLAN"])
            try:
                saved = links.save(
                    hosts,
                    report["slowest_link_gbps"],
                    plan.get("interface"),
                    report.get("links_at_once_gbps"),
                )
                _say(f"horovodrun: kept the slowest link for later jobs on these hosts: {saved}")
            except OSError as e:  # the check itself succeeded: its report stands
                _say(f"horovodrun: could not keep the slowest link for later jobs ({e})")
        return rc
    except FileNotFoundError:
        _say(f"horovodrun: {args.mpirun} not found; install Open MPI (mpirun)")
        return 127


if __name__ == "__main__":
    sys.exit(main())
