"""The cluster launcher's entrypoint: key pair, worker discovery, hostfile, command.

    python -m horovod.runner.cluster --service worker --slots 2 --hostfile F -- CMD ...

1. Makes the cluster's ed25519 key pair in --key-dir unless one is there, and writes its public
   half as `authorized_keys` into --authorized-keys-dir (which the workers mount read-only).
2. Finds the workers: the DNS name of the service resolves to every running replica (Docker's
   embedded DNS).  Retries until each one's sshd accepts TCP connections, bounded by --timeout,
   and says which ones never did.
3. Writes `host slots=N` lines, ordered by replica number, then execs the command.
"""

import argparse
import os
import sys
import time

from horovod.runner.cluster import discovery, keys


def log(msg):
    print(f"cluster: {msg}", file=sys.stderr, flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m horovod.runner.cluster", description=__doc__.split("\n")[0]
    )
    p.add_argument("--service", default="worker", help="DNS name of the workers (compose service)")
    p.add_argument("--port", type=int, default=2222, help="workers' sshd port")
    p.add_argument("--slots", type=int, default=2, help="slots (ranks) per worker")
    p.add_argument(
        "--expect",
        type=int,
        help="wait for this many workers (default: $HOROVOD_WORKERS, else those that exist)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="bound on discovery, seconds")
    p.add_argument("--key-dir", default=os.path.expanduser("~/.ssh"))
    p.add_argument("--authorized-keys-dir", help="where the workers read authorized_keys from")
    p.add_argument("--hostfile", default="/run/horovod/hostfile")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.slots < 1:
        p.error("--slots must be at least 1")
    if args.expect is None and os.environ.get("HOROVOD_WORKERS"):
        # Read here, not as argparse's default: a bad value is a usage error, not a traceback.
        try:
            args.expect = int(os.environ["HOROVOD_WORKERS"]) or None
        except ValueError:
            p.error(
                f"argument --expect: $HOROVOD_WORKERS={os.environ['HOROVOD_WORKERS']!r} is "
                "not an integer"
            )
    start = time.monotonic()
    key, made = keys.ensure_keys(args.key_dir, args.authorized_keys_dir)
    if made:
        log(f"made this cluster's key pair ({key})")
    try:
        workers = discovery.discover(args.service, args.port, args.timeout, args.expect)
    except RuntimeError as e:
        log(f"discovery failed: {e}")
        return 1
    os.makedirs(os.path.dirname(args.hostfile), exist_ok=True)
    tmp = args.hostfile + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(f"{name} slots={args.slots}\n" for name, _ in workers)
    os.replace(tmp, args.hostfile)  # the healthcheck sees a complete file or none
    log(
        f"{len(workers)} worker(s) in {time.monotonic() - start:.1f} s: "
        + ", ".join(f"{n} ({ip})" for n, ip in workers)
        + f"; {args.slots} slot(s) each -> {args.hostfile}"
    )
    if not command:
        return 0
    log("running: " + " ".join(command))
    try:
        os.execvp(command[0], command)
    except OSError as e:
        log(f"cannot run {command[0]!r}: {e.strerror}")
        return 127
