"""Runs mpirun for horovodrun (launch.py) and sees it through: relays its output, notices the
job aborting, passes signals on, and leaves no process of the job behind, horovodrun killed
included (issue 17, item 11)."""

import os
import selectors
import signal
import subprocess
import sys
import time

from horovod.runner.job_output import OutputScan

# After an abort marker (job_output.ABORT_MARKERS) mpirun gets this long to exit by itself.
ABORT_GRACE_SECONDS = 15.0


class _Relay:
    """Copies mpirun's stdout/stderr to ours, each whole line scanned by an OutputScan.  It
    runs in the thread that started mpirun (pump), and no other thread may start it: the kernel
    sends mpirun its parent-death signal when the thread that is its parent exits (see
    _mpirun_preexec), and mpirun crashes on a second SIGTERM while it stops the ranks, leaving
    them running."""

    def __init__(self, proc, output):
        self.output = output
        self._selector = selectors.DefaultSelector()
        for src, dst in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
            os.set_blocking(src.fileno(), False)
            self._selector.register(src, selectors.EVENT_READ, (dst, bytearray()))

    def open(self):
        return bool(self._selector.get_map())

    def pump(self, timeout):
        """Copies what arrives within `timeout` seconds (less if something does)."""
        if not self.open():
            time.sleep(timeout)
            return
        for key, _ in self._selector.select(timeout):
            dst, line = key.data
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:  # mpirun closed it
                self._selector.unregister(key.fileobj)
                key.fileobj.close()
                self._scan(line)
                continue
            self._write(dst, chunk)
            # Only whole lines are scanned; the rest waits for its end.
            line += chunk
            *whole, rest = line.split(b"\n")
            for raw in whole:
                self._scan(raw)
            line[:] = rest

    def drain(self, timeout):
        """Copies the rest, until mpirun's pipes close or `timeout` seconds have passed."""
        deadline = time.monotonic() + timeout
        while self.open() and time.monotonic() < deadline:
            self.pump(min(0.5, max(0.0, deadline - time.monotonic())))

    @staticmethod
    def _write(dst, chunk):
        try:
            dst.buffer.write(chunk) if hasattr(dst, "buffer") else dst.write(
                chunk.decode(errors="replace")
            )
            dst.flush()
        except (OSError, ValueError):
            # Our output is gone (terminal closed, pipe reader exited): keep draining
            # mpirun's, or it blocks on a full pipe and never exits.
            pass

    def _scan(self, raw):
        self.output.scan(bytes(raw).decode(errors="replace"))


# Signals that end the job: each is passed on to mpirun, which stops its ranks.  SIGHUP (the
# terminal closed) becomes SIGTERM: mpirun runs in a session of its own, so it would never
# see the hangup, and it handles SIGTERM by ending the job.
FORWARDED_SIGNALS = {
    signal.SIGINT: signal.SIGINT,
    signal.SIGTERM: signal.SIGTERM,
    signal.SIGHUP: signal.SIGTERM,
}
# After passing a signal on, mpirun gets this long to stop the ranks before it is killed.
SIGNAL_GRACE_SECONDS = 10.0
PR_SET_PDEATHSIG = 1


def _mpirun_preexec(parent):
    """Returns the function that the mpirun child runs before exec.  SIGKILL of horovodrun
    cannot be caught, so the kernel sends mpirun SIGTERM when horovodrun dies (PR_SET_PDEATHSIG;
    mpirun then ends its ranks), and mpirun ignores SIGPIPE: with horovodrun gone, its output
    pipes have no reader, and dying on the first write would leave the ranks running."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec():
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        if os.getppid() != parent:  # horovodrun died before prctl: nobody would signal us
            os._exit(1)

    return preexec


def run(cmd, env, placement=None, bound=None, bound_what="", report=None):
    """Run cmd, pass SIGINT/SIGTERM/SIGHUP on to it, return a shell-style exit status.  Once
    the job has aborted, mpirun gets ABORT_GRACE_SECONDS to exit before it is stopped, and
    SIGNAL_GRACE_SECONDS after a signal; with a bound (seconds), it is stopped when the bound
    passes.  No process of the job outlives horovodrun, even killed (see _mpirun_preexec).
    `report` (a dict), if given, gets what the job's end looked like: `aborted` (mpirun said
    the job aborted), `signalled` ([(rank, host, signal)]), `stall_abort` and `stalled` (the
    ranks' watchdog ended the job, naming those ranks), `signal` (one horovodrun got) and
    `slowest_link_gbps`, `links_at_once_gbps` (a --check-network report's, else None)."""
    started = time.monotonic()
    # A session of its own: when mpirun must be stopped, its ssh clients go with it.
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_mpirun_preexec(os.getpid()),
    )
    signalled = []  # (signal number, when) of the signals received

    def forward(signum, _frame):
        signalled.append((signum, time.monotonic()))
        if len(signalled) == 1:  # a second SIGTERM crashes mpirun mid-abort; see below
            proc.send_signal(FORWARDED_SIGNALS[signum])

    previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS}
    output = OutputScan()
    relay = _Relay(proc, output)
    try:
        while True:
            relay.pump(0.5)
            rc = proc.poll()
            if rc is not None:
                break
            why = _why_stop(started, bound, bound_what, signalled, output, placement)
            if why:
                _say(why)
                # SIGKILL: mpirun, mid-abort, crashes on a second SIGTERM (in PMIx_Finalize).
                # Its daemons on the hosts that answer exit when its connections close.
                _kill_session(proc.pid)
                proc.wait()
                rc = 1
                break
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    # What mpirun wrote last; its pipes close when it exits, unless one of its children (an ssh
    # client) still holds them.
    relay.drain(5)
    if report is not None:
        report.update(output.findings(), signal=signalled[0][0] if signalled else None)
    if signalled and rc != 0:
        return 128 + signalled[0][0]  # like a shell: the job ended because of that signal
    return rc if rc >= 0 else 128 - rc


def _why_stop(started, bound, bound_what, signalled, output, placement):
    """Why mpirun must be stopped now (None: it need not): a second signal, or the grace after
    the first passed; the bound passed; the grace after the job aborted passed."""
    now = time.monotonic()
    over = bound is not None and now - started > bound
    aborted = output.aborted_at and now - output.aborted_at > ABORT_GRACE_SECONDS
    # A second signal asks to hurry; otherwise mpirun had its grace to stop the ranks.
    stop = bool(signalled) and (len(signalled) > 1 or now - signalled[0][1] > SIGNAL_GRACE_SECONDS)
    if stop:
        return (
            f"horovodrun: mpirun has not stopped {SIGNAL_GRACE_SECONDS:.0f} s after "
            f"{signal.Signals(signalled[0][0]).name}"
            if len(signalled) == 1
            else "horovodrun: signalled again"
        ) + "; killing mpirun and its ranks"
    if over:
        return (
            f"horovodrun: {bound_what} did not finish within {bound:.0f} s; "
            "stopping mpirun (a host may have stopped answering "
            "while the processes started)"
        )
    if aborted:
        return _stuck_message(output.waiting_for, placement or {})
    return None


def _kill_session(sid):
    """SIGKILL to every process of session `sid` (mpirun's, started with start_new_session):
    mpirun, its ssh clients, and the ranks on this host, which mpirun puts in process groups of
    their own (killpg of mpirun's group would leave them running)."""
    members = [sid]
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses
                fields = f.read().rsplit(b")", 1)[1].split()
            if entry.isdigit() and int(fields[3]) == sid:
                members.append(int(entry))
        except (OSError, IndexError, ValueError):  # not a process, gone, or not Linux
            continue
    try:
        os.killpg(sid, signal.SIGKILL)  # its group, as before (what left the session, too)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in members:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _stuck_message(waiting_for, placement):
    where = ""
    if waiting_for and placement:
        by_host = {}
        for r in sorted(waiting_for):
            by_host.setdefault(placement.get(r, "?"), []).append(str(r))
        where = (
            " The ranks the job was waiting for run on "
            + "; ".join(
                f"{h} (rank{'s' if len(rs) > 1 else ''} {', '.join(rs)})"
                for h, rs in by_host.items()
            )
            + "."
        )
    return (
        f"horovodrun: the job aborted, but mpirun has not exited {ABORT_GRACE_SECONDS:.0f} s "
        "later: a host is not answering, so its processes cannot be confirmed stopped."
        f"{where} Stopping mpirun; check that host (paused, cut off, or down)."
    )


def _say(text):
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr is gone (terminal closed): nobody to tell
        pass
