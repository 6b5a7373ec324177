"""horovodrun: `horovodrun -np 2 python train.py` runs mpirun with the flags Horovod needs.

Single host for now (multi-host comes with the cluster images).  The mpirun command is built
by a pure function so it can be tested without MPI; main() runs it and returns its exit code.
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys

# Variables forwarded to every rank with -x (mpirun forwards only what it is told to when
# ranks start through ssh; on one host this keeps both paths alike).
FORWARD_NAMES = {"PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV",
                 "PYTHONUNBUFFERED", "OMP_NUM_THREADS"}
FORWARD_PREFIXES = ("HOROVOD_", "NCCL_", "TF_", "CUDA_", "GLOO_", "PYTHON")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="horovodrun",
        description="Run a Horovod training script on N processes of this host via mpirun.",
        usage="horovodrun [-np N] [options] command [args ...]  |  horovodrun --check-build")
    p.add_argument("-np", "--num-proc", type=int, dest="np",
                   help="number of processes (default: number of usable CPUs)")
    p.add_argument("--check-build", action="store_true",
                   help="print versions and what this build supports, then exit")
    p.add_argument("--verbose", action="store_true", help="print the mpirun command first")
    p.add_argument("--mpi-args", default="", help="extra mpirun arguments, one quoted string")
    p.add_argument("--mpirun", default="mpirun", help="mpirun executable (default: %(default)s)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="program and its arguments")
    args = p.parse_args(argv)
    if not args.check_build:
        if not args.command:
            p.error("a command is required (e.g. horovodrun -np 2 python train.py)")
        if args.np is not None and args.np < 1:
            p.error("-np must be at least 1")
    return args


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def forwarded(env):
    pattern = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
    return sorted(k for k in env if pattern.match(k)
                  and (k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES)))


def mpirun_command(args, env, cpus, is_root):
    np_ = args.np or cpus
    cmd = [args.mpirun]
    if is_root:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(np_), "--bind-to", "none", "--map-by", "slot"]
    if np_ > cpus:
        cmd.append("--oversubscribe")
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


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check_build:
        from horovod.runner.check_build import check_build
        return check_build()
    env = dict(os.environ)
    cmd = mpirun_command(args, env, usable_cpus(), os.geteuid() == 0)
    if args.verbose:
        print(shlex.join(cmd), file=sys.stderr, flush=True)
    try:
        return run(cmd, env)
    except FileNotFoundError:
        print(f"horovodrun: {args.mpirun} not found; install Open MPI (mpirun)", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
