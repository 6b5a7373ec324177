"""horovodrun --gloo's ranks seen through (gloo_launch.py starts them): their output relayed line
by line with upstream's `[rank]<stdout>:` prefix, the first rank that fails or a signal to
horovodrun ending the job, and no rank left behind (a rank, or its ssh, dies with horovodrun)."""

import os
import selectors
import signal
import subprocess
import sys
import time

from horovod.runner.job_output import OutputScan
from horovod.runner.supervise import _say

# SIGTERM to a rank, then this long before SIGKILL.
GRACE_SECONDS = 5.0
# A remote rank's ssh gets this much more: its wrapper does the SIGTERM/SIGKILL over there.
SSH_EXTRA_SECONDS = 5.0
PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # to horovodrun: ends the job


def _preexec(parent):
    """A rank (or its ssh) gets SIGKILL when horovodrun dies, even by SIGKILL."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec():
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # horovodrun died before prctl
            os._exit(1)

    return preexec


def start_rank_process(start):
    """Starts one rank (or its ssh) as `start` (gloo_launch.rank_launch) says: a session of its
    own, SIGKILLed with horovodrun, output piped; a remote rank reads its secrets from stdin."""
    proc = subprocess.Popen(
        start.argv,
        env=start.env,
        stdin=subprocess.PIPE if start.remote else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_preexec(os.getpid()),
    )
    if start.remote:
        try:
            proc.stdin.write(start.stdin)
            proc.stdin.flush()
        except OSError:  # ssh already gone: its exit status says why
            pass
    return proc


class _Rank:
    def __init__(self, start, proc):
        self.start, self.proc = start, proc
        self.slot = start.slot
        self.rc = None
        self.killed = False


class _PrefixedOutput:
    """The ranks' stdout and stderr copied to ours, whole lines each prefixed with its rank
    and stream, and scanned (job_output.OutputScan: the watchdog's stall abort)."""

    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.scan = OutputScan()

    def add(self, rank, proc):
        """Relays proc's output. Returns a function that changes the rank its lines are
        prefixed with (a process that re-forms in place takes a new rank: elastic_pool.py)."""
        prefixes = []
        for src, dst, tag in (
            (proc.stdout, sys.stdout, "stdout"),
            (proc.stderr, sys.stderr, "stderr"),
        ):
            os.set_blocking(src.fileno(), False)
            prefix = bytearray(f"[{rank}]<{tag}>:".encode())
            prefixes.append((prefix, tag))
            self.selector.register(src, selectors.EVENT_READ, (dst, prefix, bytearray()))

        def renumber(new_rank):
            for prefix, tag in prefixes:
                prefix[:] = f"[{new_rank}]<{tag}>:".encode()

        return renumber

    def pump(self, timeout):
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        for key, _ in self.selector.select(timeout):
            dst, prefix, pending = key.data
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()
                if pending:
                    self._line(dst, prefix, bytes(pending))
                continue
            pending += chunk
            *whole, rest = pending.split(b"\n")
            for line in whole:
                self._line(dst, prefix, line)
            pending[:] = rest

    def drain(self, timeout):
        deadline = time.monotonic() + timeout
        while self.selector.get_map() and time.monotonic() < deadline:
            self.pump(0.1)
        for key in list(self.selector.get_map().values()):  # a leftover still holds a pipe
            self.selector.unregister(key.fileobj)
            key.fileobj.close()

    def _line(self, dst, prefix, line):
        self.scan.scan(line.decode(errors="replace"))
        try:
            dst.buffer.write(prefix + line + b"\n")
            dst.flush()
        except (OSError, ValueError, AttributeError):
            pass  # our output is gone: keep draining the ranks'


class Job:
    """Starts the ranks and sees them through: relays their output, prefixed; on the first
    rank that fails, or a signal to horovodrun, stops the rest (SIGTERM, SIGKILL after
    GRACE_SECONDS; a second signal: SIGKILL at once)."""

    def __init__(self, starts):
        self.starts = starts
        self.ranks = []
        self.output = _PrefixedOutput()
        self.signals = []
        self.failed = None  # the first rank that exited non-zero
        self.stopping_since = None

    def run(self, report):
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            for start in self.starts:
                if self.signals:
                    break
                try:
                    self._spawn(start)
                except OSError as e:
                    what = "ssh" if start.remote else start.argv[0]
                    _say(f"horovodrun: cannot start rank {start.slot.rank} ({what}: {e})")
                    self.failed = self.failed or (start.slot, 127, None)
                    break
            self._supervise()
        finally:
            for r in self.ranks:  # nothing of a stopped job stays (leftovers of a rank's group)
                if r.rc is None or self.stopping_since is not None:
                    self._kill(r)
            for r in self.ranks:
                if r.rc is None:
                    r.rc = r.proc.wait()
                if r.proc.stdin:
                    r.proc.stdin.close()
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.output.drain(2.0)
        return self._finish(report)

    def _spawn(self, start):
        proc = start_rank_process(start)
        self.ranks.append(_Rank(start, proc))
        self.output.add(start.slot.rank, proc)

    def _on_signal(self, signum, _frame):
        self.signals.append(signum)

    def _supervise(self):
        while True:
            self.output.pump(0.2)
            for r in self.ranks:
                if r.rc is None:
                    r.rc = r.proc.poll()
                    if (
                        r.rc not in (None, 0)
                        and self.failed is None
                        and self.stopping_since is None
                    ):
                        self.failed = (r.slot, r.rc, r.start.remote)
            if (self.failed or self.signals) and self.stopping_since is None:
                self._stop()
            if all(r.rc is not None for r in self.ranks) and len(self.ranks) == len(self.starts):
                return
            if self.stopping_since is not None:
                waited = time.monotonic() - self.stopping_since
                for r in self.ranks:
                    limit = GRACE_SECONDS + (SSH_EXTRA_SECONDS if r.start.remote else 0)
                    if r.rc is None and not r.killed and (waited > limit or len(self.signals) > 1):
                        self._kill(r)
                if all(r.rc is not None for r in self.ranks):
                    return

    def _stop(self):
        self.stopping_since = time.monotonic()
        running = [r for r in self.ranks if r.rc is None]
        if self.failed:
            slot, rc, remote = self.failed
            what = "" if remote is None else describe_exit(slot, rc, remote)  # None: not started
            more = f"stopping the other {len(running)} rank(s)" if running else ""
            if what or more:
                _say(f"horovodrun: {'; '.join(w for w in (what, more) if w)}")
        else:
            name = signal.Signals(self.signals[0]).name
            _say(f"horovodrun: {name}: stopping {len(running)} rank(s)")
        for r in running:
            if r.start.remote:
                try:  # EOF: the remote wrapper stops its rank's process group
                    r.proc.stdin.close()
                except OSError:
                    pass
            else:
                _killpg(r.proc.pid, signal.SIGTERM)

    def _kill(self, r):
        r.killed = True
        _killpg(r.proc.pid, signal.SIGKILL)  # local: the rank's group; remote: ssh's

    def _finish(self, report):
        signalled = []
        if self.failed:
            slot, rc, remote = self.failed
            sig = exit_signal(rc, remote)
            if sig:
                signalled.append((slot.rank, slot.host, sig))
        report.update(
            aborted=self.failed is not None,
            signalled=signalled,
            stall_abort=self.output.scan.stall_abort,
            stalled=sorted(self.output.scan.stalled),
            signal=self.signals[0] if self.signals else None,
            slowest_link_gbps=None,
            links_at_once_gbps=None,
        )
        if self.signals and any(r.rc != 0 for r in self.ranks):
            return 128 + self.signals[0]
        if self.failed:
            rc = self.failed[1]
            return rc if rc >= 0 else 128 - rc
        return 0


def exit_signal(rc, remote):
    """The signal that ended a rank, from its exit status (remote: the wrapper's 128 + n)."""
    if rc < 0:
        return -rc
    if remote and 128 < rc < 128 + 65:
        return rc - 128
    return None


def describe_exit(slot, rc, remote):
    where = f"rank {slot.rank} on {slot.host}"
    if remote and rc == 255:
        return f"{where}: ssh failed or lost its connection (exit 255)"
    sig = exit_signal(rc, remote)
    if sig:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        return f"{where} was killed by signal {name} (exit {128 + sig})"
    return f"{where} exited with code {rc}"


def _killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
