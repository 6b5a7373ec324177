"""The compose cluster's launcher entrypoint: key pair, worker discovery, hostfile, command.

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
import re
import socket
import subprocess
import sys
import time


def log(msg):
    print(f"cluster: {msg}", file=sys.stderr, flush=True)


def ensure_keys(key_dir, authorized_dir):
    key = os.path.join(key_dir, "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(key_dir, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                        f"horovod-cluster@{socket.gethostname()}", "-f", key], check=True)
        log(f"made this cluster's key pair ({key})")
    os.chmod(key_dir, 0o700)
    os.chmod(key, 0o600)
    if authorized_dir:
        os.makedirs(authorized_dir, exist_ok=True)
        os.chmod(authorized_dir, 0o755)  # sshd's StrictModes: not group/world writable
        target = os.path.join(authorized_dir, "authorized_keys")
        tmp = target + ".tmp"
        with open(key + ".pub") as src, open(tmp, "w") as dst:
            dst.write(src.read())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # a worker never reads a half-written file


def _name_of(ip):
    """Container name for an address (Docker's DNS answers reverse lookups), e.g.
    'horovod-worker-2' from 'horovod-worker-2.horovod_cluster'; the address if unknown."""
    try:
        return socket.gethostbyaddr(ip)[0].split(".")[0]
    except OSError:
        return ip


def _replica_key(name):
    m = re.search(r"(\d+)$", name)
    return (int(m.group(1)) if m else 0, name)


def _answers(ip, port, timeout=1.0):
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except OSError:
        return False


def discover(service, port, timeout, expect=None):
    """[(name, ip)] of the service's replicas whose sshd answers; raises RuntimeError naming
    what was (not) found when the bound passes."""
    deadline = time.monotonic() + timeout
    seen, silent = [], []
    while True:
        try:
            ips = sorted({a[4][0] for a in socket.getaddrinfo(service, port, socket.AF_INET,
                                                               socket.SOCK_STREAM)})
        except socket.gaierror:
            ips = []
        seen = [(_name_of(ip), ip) for ip in ips]
        silent = [f"{n} ({ip})" for n, ip in seen if not _answers(ip, port)]
        enough = expect is None or len(seen) >= expect
        if seen and not silent and enough:
            return sorted(seen, key=lambda s: _replica_key(s[0]))
        if time.monotonic() >= deadline:
            if not seen:
                raise RuntimeError(f"no container answers to the name {service!r} after {timeout:.0f} s "
                                   f"(are the {service} services up on this network?)")
            if silent:
                raise RuntimeError(f"sshd on port {port} never answered on {', '.join(silent)} "
                                   f"within {timeout:.0f} s (see `docker compose logs {service}`)")
            raise RuntimeError(f"found {len(seen)} {service}(s), expected {expect}, within {timeout:.0f} s")
        time.sleep(0.25)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m horovod.runner.cluster", description=__doc__.split("\n")[0])
    p.add_argument("--service", default="worker", help="DNS name of the workers (compose service)")
    p.add_argument("--port", type=int, default=2222, help="workers' sshd port")
    p.add_argument("--slots", type=int, default=2, help="slots (ranks) per worker")
    p.add_argument("--expect", type=int, default=int(os.environ.get("HOROVOD_WORKERS", 0)) or None,
                   help="wait for this many workers (default: those that exist; $HOROVOD_WORKERS)")
    p.add_argument("--timeout", type=float, default=60.0, help="bound on discovery, seconds")
    p.add_argument("--key-dir", default=os.path.expanduser("~/.ssh"))
    p.add_argument("--authorized-keys-dir", help="where the workers read authorized_keys from")
    p.add_argument("--hostfile", default="/run/horovod/hostfile")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.slots < 1:
        p.error("--slots must be at least 1")
    start = time.monotonic()
    ensure_keys(args.key_dir, args.authorized_keys_dir)
    try:
        workers = discover(args.service, args.port, args.timeout, args.expect)
    except RuntimeError as e:
        log(f"discovery failed: {e}")
        return 1
    os.makedirs(os.path.dirname(args.hostfile), exist_ok=True)
    tmp = args.hostfile + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(f"{name} slots={args.slots}\n" for name, _ in workers)
    os.replace(tmp, args.hostfile)  # the healthcheck sees a complete file or none
    log(f"{len(workers)} worker(s) in {time.monotonic() - start:.1f} s: "
        + ", ".join(f"{n} ({ip})" for n, ip in workers) + f"; {args.slots} slot(s) each -> {args.hostfile}")
    if not command:
        return 0
    log("running: " + " ".join(command))
    try:
        os.execvp(command[0], command)
    except OSError as e:
        log(f"cannot run {command[0]!r}: {e.strerror}")
        return 127


if __name__ == "__main__":
    sys.exit(main())
