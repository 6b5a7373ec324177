"""horovodrun: `horovodrun -np 4 -H a:2,b:2 python train.py` runs mpirun with the flags Horovod
needs, after a preflight of every host.

Upstream's flag names, so upstream command lines work.  On this host alone (no -H/--hostfile,
or only localhost) nothing goes through ssh.  With remote hosts, preflight.run() asks every host
first and nothing is launched unless all of them pass.  The mpirun command is built by a pure
function (mpirun_command) so it can be tested without MPI; main() returns the job's exit code.
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys

from horovod.runner import hosts as hostlib

# Variables forwarded to every rank with -x (mpirun forwards only what it is told to when
# ranks start through ssh; on one host this keeps both paths alike).
FORWARD_NAMES = {"PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV",
                 "PYTHONUNBUFFERED", "OMP_NUM_THREADS"}
FORWARD_PREFIXES = ("HOROVOD_", "NCCL_", "TF_", "CUDA_", "GLOO_", "PYTHON")
# Flags that set an engine knob: (flag, HOROVOD_* variable, conversion).  The variables work too.
KNOB_FLAGS = [
    ("--fusion-threshold-mb", "HOROVOD_FUSION_THRESHOLD", lambda v: str(int(float(v) * (1 << 20)))),
    ("--cycle-time-ms", "HOROVOD_CYCLE_TIME", str),
    ("--cache-capacity", "HOROVOD_CACHE_CAPACITY", str),
    ("--timeline-filename", "HOROVOD_TIMELINE", str),
    ("--stall-check-warning-time-seconds", "HOROVOD_STALL_CHECK_TIME_SECONDS", str),
    ("--stall-check-shutdown-time-seconds", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", str),
    ("--log-level", "HOROVOD_LOG_LEVEL", str),
]
DEFAULT_START_TIMEOUT = 30.0


def parse_args(argv, env=os.environ):
    p = argparse.ArgumentParser(
        prog="horovodrun",
        description="Run a Horovod training script on N processes, on this host or across "
                    "hosts over ssh (after a preflight of every host), through mpirun.",
        usage="horovodrun [-np N] [-H host:slots,... | --hostfile FILE] [options] command [args ...]"
              "  |  horovodrun --check-build")
    p.add_argument("-np", "--num-proc", type=int, dest="np",
                   help="number of processes (default: the hosts' slots, or this host's CPUs)")
    p.add_argument("-H", "--hosts", help="hosts and their slots, e.g. w1:2,w2:2 "
                                         "(default: $HOROVOD_HOSTS, else this host)")
    p.add_argument("--hostfile", help="file of 'host slots=N' lines (default: $HOROVOD_HOSTFILE)")
    p.add_argument("-p", "--ssh-port", type=int, help="sshd port of every host")
    p.add_argument("-i", "--ssh-identity-file", help="ssh private key to log in with")
    p.add_argument("--network-interface", dest="nics",
                   help="interface name(s) or subnet(s) the ranks talk over, comma-separated "
                        "(default: detected: the subnet every host shares, never lo or docker0)")
    p.add_argument("--start-timeout", type=float,
                   default=float(env.get("HOROVOD_START_TIMEOUT", DEFAULT_START_TIMEOUT)),
                   help="bound in seconds on the preflight of all hosts (default: %(default)s; "
                        "$HOROVOD_START_TIMEOUT)")
    p.add_argument("--check-build", action="store_true",
                   help="print versions and what this build supports, then exit")
    p.add_argument("--verbose", action="store_true",
                   help="print the preflight's report and the mpirun command")
    for flag, var, _ in KNOB_FLAGS:
        p.add_argument(flag, dest=var, help=f"sets {var}")
    p.add_argument("--no-stall-check", action="store_true", help="sets HOROVOD_STALL_CHECK_DISABLE=1")
    p.add_argument("--mpi", action="store_true", help="use MPI (the only controller; accepted "
                                                      "for upstream command lines)")
    p.add_argument("--mpi-args", default="", help="extra mpirun arguments, one quoted string")
    p.add_argument("--mpirun", default="mpirun", help="mpirun executable (default: %(default)s)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="program and its arguments")
    args = p.parse_args(argv)
    if args.check_build:
        return args
    if not args.command:
        p.error("a command is required (e.g. horovodrun -np 2 python train.py)")
    if args.np is not None and args.np < 1:
        p.error("-np must be at least 1")
    if args.hosts and args.hostfile:
        p.error("give -H/--hosts or --hostfile, not both")
    if args.start_timeout <= 0:
        p.error("--start-timeout must be positive")
    if not args.hosts and not args.hostfile:
        args.hosts = env.get("HOROVOD_HOSTS") or None
        args.hostfile = None if args.hosts else env.get("HOROVOD_HOSTFILE") or None
    return args


def resolve_hosts(args):
    """[(host, slots)] or None for 'this host only'.  Raises hostlib.HostError."""
    if args.hostfile:
        return hostlib.parse_hostfile(args.hostfile)
    if args.hosts:
        return hostlib.parse_hosts(args.hosts)
    return None


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def forwarded(env):
    pattern = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
    return sorted(k for k in env if pattern.match(k)
                  and (k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES)))


def knob_env(args, env):
    """env plus the HOROVOD_* variables the knob flags set (flags win over the environment)."""
    out = dict(env)
    for _, var, convert in KNOB_FLAGS:
        value = getattr(args, var)
        if value is not None:
            out[var] = convert(value)
    if args.no_stall_check:
        out["HOROVOD_STALL_CHECK_DISABLE"] = "1"
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
        cmd += ["--mca", "plm_rsh_args", shlex.join(ssh_args), "--mca", "plm_rsh_no_tree_spawn", "1"]
    cmd += list(network_args)
    for name in forwarded(env):
        cmd += ["-x", name]
    cmd += shlex.split(args.mpi_args)
    return cmd + list(args.command)


def run(cmd, env):
    """Run cmd, pass SIGINT/SIGTERM on to it, return a shell-style exit status."""
    proc = subprocess.Popen(cmd, env=env)
    forward = lambda signum, _frame: proc.send_signal(signum)  # noqa: E731
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return rc if rc >= 0 else 128 - rc


def _say(text):
    print(text, file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check_build:
        from horovod.runner.check_build import check_build
        return check_build()
    try:
        hosts = resolve_hosts(args)
    except hostlib.HostError as e:
        _say(f"horovodrun: {e}")
        return 2
    if hosts and all(hostlib.is_local(h) for h, _ in hosts):
        hosts = None if len(hosts) == 1 and args.np is None else hosts
    env = knob_env(args, os.environ)
    network_args, ssh_args = [], []
    if hosts:
        total = sum(s for _, s in hosts)
        if args.np and args.np > total:
            _say(f"horovodrun: -np {args.np} but the hosts have {total} slots "
                 f"({hostlib.format_hosts(hosts)}); give fewer processes or more slots")
            return 2
        if any(not hostlib.is_local(h) for h, _ in hosts):
            from horovod.runner import preflight
            ssh_args = preflight.ssh_base(args.ssh_port, args.ssh_identity_file,
                                          min(10.0, args.start_timeout))
            local = {h: hostlib.is_local(h) for h, _ in hosts}
            try:
                _, choice, text = preflight.run(hosts, local, ssh_args, args.start_timeout, args.nics)
            except preflight.PreflightFailed as e:
                _say(str(e))
                return 3
            _say(text)
            network_args = choice.mpirun_args()
    if not network_args and args.nics:
        network_args = ["--mca", "btl_tcp_if_include", args.nics,
                        "--mca", "oob_tcp_if_include", args.nics]
    cmd = mpirun_command(args, env, usable_cpus(), os.geteuid() == 0, hosts, network_args, ssh_args)
    if args.verbose:
        _say(shlex.join(cmd))
    try:
        return run(cmd, env)
    except FileNotFoundError:
        _say(f"horovodrun: {args.mpirun} not found; install Open MPI (mpirun)")
        return 127


if __name__ == "__main__":
    sys.exit(main())
