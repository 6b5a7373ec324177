"""The elastic driver's host discovery: runs the user's --host-discovery-script (each call
bounded, nothing of it left running) and reads its 'host:slots' lines."""

import os
import signal
import subprocess
import threading

DISCOVERY_INTERVAL = 1.0
DISCOVERY_TIMEOUT = 10.0


class DiscoveryError(Exception):
    pass


def parse_discovery(text, default_slots):
    """[(host, slots)] from the script's 'host:slots' / 'host' lines, in order, merged."""
    found = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        host, sep, slots = line.partition(":")
        try:
            n = int(slots) if sep else default_slots
        except ValueError:
            raise DiscoveryError(f"cannot read {line!r}: expected host:slots") from None
        if not host or n < 1:
            raise DiscoveryError(f"cannot read {line!r}: expected host:slots with slots >= 1")
        found[host] = found.get(host, 0) + n
    return list(found.items())


def discovery_words(error):
    """A DiscoveryError's text as the driver's log says it."""
    return ("discovery " if error.startswith("timed out") else "discovery failed: ") + error


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Discovery:
    """Runs the discovery script, each call bounded by DISCOVERY_TIMEOUT. The script runs in a
    session of its own so that a timeout kills what it started too (killing only the shell left
    a `sleep` in it running for good); close() does the same to calls in flight and refuses new
    ones, so nothing of it outlives the job."""

    def __init__(self, script, default_slots):
        self.script = script
        self.default_slots = default_slots
        self._lock = threading.Lock()
        self._running = set()
        self._closed = False

    def __call__(self):
        """[(host, slots)] the script lists; DiscoveryError if it fails or times out."""
        with self._lock:
            if self._closed:
                raise DiscoveryError("the job is ending")
            proc = subprocess.Popen(
                self.script,
                shell=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            self._running.add(proc)
        try:
            out, err = proc.communicate(timeout=DISCOVERY_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise DiscoveryError(
                f"timed out: {self.script!r} did not answer within {DISCOVERY_TIMEOUT:g} s; "
                "killed it and its process group"
            ) from None
        finally:
            if proc.returncode is None:  # timed out or interrupted (Ctrl-C): none of it stays
                _kill_group(proc)
                proc.wait()
            with self._lock:
                self._running.discard(proc)
            proc.stdout.close()
            proc.stderr.close()
        if proc.returncode != 0:
            raise DiscoveryError(
                f"{self.script!r} exited with {proc.returncode}: "
                f"{err.strip()[-300:] or '(no output)'}"
            )
        return parse_discovery(out, self.default_slots)

    def close(self):
        with self._lock:
            self._closed = True
            running = list(self._running)
        for proc in running:
            _kill_group(proc)
