"""Finding the workers: the service's DNS name resolves to every running replica (Docker's
embedded DNS; a Kubernetes headless service does the same), each one counted once its sshd
accepts TCP connections, within a bound that names the ones that never did."""

import re
import socket
import time


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


def _resolve(service, port):
    try:
        return sorted(
            {a[4][0] for a in socket.getaddrinfo(service, port, socket.AF_INET, socket.SOCK_STREAM)}
        )
    except socket.gaierror:
        return []


def current(service, port, timeout=1.0):
    """[(name, ip)] of the replicas that answer now, ordered by replica number: one look, no
    waiting (the elastic driver runs it every second as its host discovery)."""
    found = [(_name_of(ip), ip) for ip in _resolve(service, port) if _answers(ip, port, timeout)]
    return sorted(found, key=lambda s: _replica_key(s[0]))


def discover(service, port, timeout, expect=None):
    """[(name, ip)] of the service's replicas whose sshd answers; raises RuntimeError naming
    what was (not) found when the bound passes."""
    deadline = time.monotonic() + timeout
    seen, silent = [], []
    while True:
        ips = _resolve(service, port)
        seen = [(_name_of(ip), ip) for ip in ips]
        silent = [f"{n} ({ip})" for n, ip in seen if not _answers(ip, port)]
        enough = expect is None or len(seen) >= expect
        if seen and not silent and enough:
            return sorted(seen, key=lambda s: _replica_key(s[0]))
        if time.monotonic() >= deadline:
            if not seen:
                raise RuntimeError(
                    f"no container answers to the name {service!r} after {timeout:.0f} s "
                    f"(are the {service} services up on this network?)"
                )
            if silent:
                raise RuntimeError(
                    f"sshd on port {port} never answered on {', '.join(silent)} "
                    f"within {timeout:.0f} s (see `docker compose logs {service}`)"
                )
            raise RuntimeError(
                f"found {len(seen)} {service}(s), expected {expect}, within {timeout:.0f} s"
            )
        time.sleep(0.25)
