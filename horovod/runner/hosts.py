"""Hosts and slots: `-H a:2,b:2`, a hostfile (`a slots=2`), and which of them are this machine."""

import re
import socket

LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}
MAX_HOSTFILE_CHARS = 1 << 20


class HostError(ValueError):
    """A host list or hostfile that cannot be used; the message says which entry and why."""


def _slots(text, where):
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise HostError(f"{where}: slots must be a positive integer, got {text!r}")
    return int(text)


def parse_hosts(spec):
    """'a:2,b' -> [('a', 2), ('b', 1)] (upstream's -H syntax; a host without :N has 1 slot)."""
    hosts = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, sep, slots = item.rpartition(":")
        if not sep:
            name, slots = item, "1"
        if not name:
            raise HostError(f"-H entry {item!r}: no host name")
        hosts.append((name, _slots(slots, f"-H entry {item!r}")))
    if not hosts:
        raise HostError(f"-H {spec!r}: no hosts")
    return _merge(hosts)


def parse_hostfile(path):
    """Lines `host slots=N` (or `host:N`, or `host`), '#' comments; as Open MPI's hostfile."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_HOSTFILE_CHARS + 1)  # bounded: --hostfile /dev/zero must end
    except OSError as e:
        raise HostError(f"hostfile {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise HostError(
            f"hostfile {path}: not a text file (byte {e.object[e.start]:#04x} at "
            f"offset {e.start} is not UTF-8)"
        ) from None
    if len(text) > MAX_HOSTFILE_CHARS:
        raise HostError(
            f"hostfile {path}: longer than {MAX_HOSTFILE_CHARS} characters; not a hostfile"
        )
    hosts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"hostfile {path} line {lineno}"
        # A NUL (or another control character) is in no host name, and no argv can hold a NUL.
        if not line.replace("\t", " ").isprintable():
            raise HostError(f"{where}: unexpected control character in {line!r}")
        fields = line.split()
        name, slots = fields[0], 1
        if ":" in name:
            name, _, n = name.rpartition(":")
            slots = _slots(n, where)
        for f in fields[1:]:
            key, _, value = f.partition("=")
            if key in ("slots", "max_slots", "max-slots"):
                if key == "slots":
                    slots = _slots(value, where)
            else:
                raise HostError(f"{where}: unknown field {f!r} (expected 'host slots=N')")
        hosts.append((name, slots))
    if not hosts:
        raise HostError(f"hostfile {path}: no hosts")
    return _merge(hosts)


def _merge(hosts):
    """A host named twice gets the sum of its slots, at its first position (as mpirun does)."""
    order, total = [], {}
    for name, slots in hosts:
        if name not in total:
            order.append(name)
            total[name] = 0
        total[name] += slots
    return [(name, total[name]) for name in order]


def format_hosts(hosts):
    return ",".join(f"{name}:{slots}" for name, slots in hosts)


def is_local(name, _own=None):
    """True for names of this machine: localhost, its hostname or FQDN."""
    if name in LOCAL_NAMES:
        return True
    own = _own or {socket.gethostname(), socket.getfqdn()}
    return name in own
