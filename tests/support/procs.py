"""The processes of one job, found by a marker: a unique word the test puts on the job's command
lines (an argument the program ignores), so that leftovers are found whatever their parent,
process group or session became, and killed after the test, whatever its outcome."""

import os
import signal
import time
import uuid


def new_marker(what):
    return f"hvd-{what}-{uuid.uuid4().hex[:12]}"


def with_marker(marker):
    """{pid: command line} of the live processes whose command line holds `marker` (zombies
    have none; this process is left out)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(marker.encode() in a for a in argv):
            found[int(entry)] = " ".join(a.decode(errors="replace") for a in argv if a)
    return found


def wait_gone(marker, timeout):
    """Waits up to `timeout` seconds for every process with `marker` to end; returns those left."""
    deadline = time.monotonic() + timeout
    while True:
        left = with_marker(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def wait_for(predicate, timeout, what):
    """Polls predicate() until it is true; raises AssertionError naming `what` after timeout s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.1)


def kill_all(marker):
    """SIGKILL to every process with `marker`: a failed test must not leave its job running."""
    for pid in with_marker(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
