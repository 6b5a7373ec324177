"""The slowest link `horovodrun --check-network` measured between a set of hosts, kept on the
launching host so that a later job on the same hosts can compare its own allreduce with it: the
job's ranks get HOROVOD_LINK_GBPS and rank 0's end-of-job summary says how much of the links the
allreduce used (issue 20, part 4).

One JSON file maps each measured host set (its sorted names, comma-joined) to its slowest link.
A job on another set, even a subset, gets nothing: its slowest link may be a faster one."""

import json
import os
import re
import time

# The line of the check's report that carries the figure (network_report.report prints it).
# The second figure: the slowest link with all of them busy at once, as a ring keeps them.
REPORT_LINE = re.compile(
    r"^links: slowest ([0-9.]+) GB/s between hosts \(\S+ -> \S+\)(?:, ([0-9.]+) GB/s all at once)?"
)


def path():
    """HOROVOD_LINKS_FILE, else the user's cache directory."""
    if os.environ.get("HOROVOD_LINKS_FILE"):
        return os.environ["HOROVOD_LINKS_FILE"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "horovod", "links.json")


def key(hosts):
    return ",".join(sorted({h for h, _ in hosts}))


def _read(p):
    try:
        with open(p) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save(hosts, gbps, interface, at_once_gbps=None):
    """Records `gbps` as the slowest link among `hosts` ([(host, slots)]), and `at_once_gbps` as
    the slowest with all links busy at once if measured; returns the file."""
    p = path()
    data = _read(p)
    data[key(hosts)] = {"slowest_gbps": gbps, "interface": interface, "measured": time.time()}
    if at_once_gbps:
        data[key(hosts)]["at_once_gbps"] = at_once_gbps
    os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
    tmp = f"{p}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, p)  # a job reading it meanwhile sees the old file or the new, never half
    return p


def load(hosts):
    """The record for exactly these hosts, or None."""
    entry = _read(path()).get(key(hosts))
    if not isinstance(entry, dict) or not isinstance(entry.get("slowest_gbps"), (int, float)):
        return None
    return entry if entry["slowest_gbps"] > 0 else None


def at_once(entry):
    """The record's slowest link with all links busy at once, or None (not measured)."""
    v = entry.get("at_once_gbps")
    return v if isinstance(v, (int, float)) and v > 0 else None


def describe(entry):
    """How the launcher names a record it passes on."""
    age = max(0.0, time.time() - float(entry.get("measured", 0)))
    if age < 60:
        when = "under a minute ago"
    elif age < 7200:
        when = f"{age / 60:.0f} min ago"
    else:
        when = f"{age / 3600:.0f} h ago"
    together = at_once(entry)
    if together:
        return (
            f"horovodrun: slowest link between these hosts {entry['slowest_gbps']:.3g} GB/s, "
            f"{together:.3g} GB/s all at once (horovodrun --check-network, {when}): "
            "HOROVOD_LINK_GBPS and HOROVOD_LINK_AT_ONCE_GBPS for the end-of-job summary"
        )
    return (
        f"horovodrun: slowest link between these hosts {entry['slowest_gbps']:.3g} GB/s "
        f"(horovodrun --check-network, {when}): HOROVOD_LINK_GBPS for the end-of-job summary"
    )
