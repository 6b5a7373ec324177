"""The cluster launcher's entrypoint: key pair, worker discovery, hostfile, command.

    python -m horovod.runner.cluster --service worker --slots 2 --hostfile F -- CMD ...

1. Makes the cluster's ed25519 key pair in --key-dir unless one is there, and writes its public
   half as `authorized_keys` into --authorized-keys-dir (which the workers mount read-only).
2. Finds the workers: the DNS name of the service resolves to every running replica (Docker's
   embedded DNS).  Retries until each one's sshd accepts TCP connections, bounded by --timeout,
   and says which ones never did.
3. Writes `host slots=N` lines, ordered by replica number, then execs the command.

    python -m horovod.runner.cluster --discover

prints the replicas that answer now as `host:slots` lines, for `horovodrun
--host-discovery-script` (elastic jobs follow `docker compose up --scale worker=N`). Inside the
launcher a bare --discover takes the service, port and slots the launcher was started with
(from CLUSTER_FILE, since `docker compose exec` does not see the entrypoint's environment).
"""

import argparse
import json
import os
import sys
import time

from horovod.runner.cluster import discovery, keys


def log(msg):
    print(f"cluster: {msg}", file=sys.stderr, flush=True)


CLUSTER_FILE = "/run/horovod/cluster.json"


def discover_now(args, given):
    """--discover: one look at the service, printed as host:slots lines."""
    try:
        with open(CLUSTER_FILE) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        saved = {}
    service = args.service if "service" in given else saved.get("service", args.service)
    port = args.port if "port" in given else saved.get("port", args.port)
    slots = args.slots if "slots" in given else saved.get("slots", args.slots)
    for name, _ in discovery.current(service, port):
        print(f"{name}:{slots}")
    return 0


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
    p.add_argument(
        "--discover",
        action="store_true",
        help="print the workers that answer now as host:slots lines, then exit",
    )
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.slots < 1:
        p.error("--slots must be at least 1")
    if args.discover:
        argv_ = sys.argv[1:] if argv is None else argv
        given = {a.lstrip("-").split("=")[0] for a in argv_ if a.startswith("--")}
        return discover_now(args, given)
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
    try:  # for a later bare --discover (elastic jobs)
        os.makedirs(os.path.dirname(CLUSTER_FILE), exist_ok=True)
        with open(CLUSTER_FILE + ".tmp", "w") as f:
            json.dump({"service": args.service, "port": args.port, "slots": args.slots}, f)
        os.replace(CLUSTER_FILE + ".tmp", CLUSTER_FILE)
    except OSError as e:
        log(f"cannot write {CLUSTER_FILE} ({e}); --discover needs --service/--port/--slots")
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
