"""What a job's output says about how it is ending, line by line: mpirun's abort markers and its
report of a rank killed by a signal, the engine watchdog's stall abort and the ranks it waited
for, a --check-network report's slowest link.  supervise.py (mpirun) and gloo_supervise.py
(--gloo's ranks) scan every line they relay with an OutputScan."""

import re
import time

from horovod.runner import links

# Lines that mean the job is ending on an error.  After one, mpirun normally exits within a few
# seconds; when a host stops answering (paused, cut off) it waits forever for that host's daemon
# to confirm its processes are gone, so horovodrun bounds the wait.
ABORT_MARKERS = (
    "MPI_ABORT was invoked",
    "ORTE has lost communication",
    "Aborting the job",
    "Primary job  terminated normally, but",
    "ORTE was unable to reliably start",
)
WAITING_FOR = re.compile(r"waiting for ranks? \[?([0-9, ]+)\]?")
# mpirun's report of a rank killed by a signal (the elastic driver counts it as a lost peer).
SIGNALLED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
# The engine's watchdog (csrc/engine/watchdog.cc) ending the job because ranks stopped answering
# inside a collective: MPI_Abort, so those ranks' peers never reach Python to say why.
STALL_ABORT = "Aborting the job (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="


class OutputScan:
    def __init__(self):
        self.aborted_at = None  # monotonic time of the first abort marker
        self.waiting_for = set()
        self.signalled = []  # (rank, host, signal) as mpirun reported them
        self.stall_abort = False  # the watchdog aborted the job (STALL_ABORT)
        self.stalled = set()  # the ranks its abort named as not answering
        self.slowest_link_gbps = None  # from a --check-network report (runner/links.py)
        self.links_at_once_gbps = None  # the same links all busy at once

    def scan(self, line):
        m = WAITING_FOR.search(line)
        if m:
            self.waiting_for.update(int(r) for r in m.group(1).replace(",", " ").split())
        if STALL_ABORT in line:
            self.stall_abort = True
            if m:
                self.stalled.update(int(r) for r in m.group(1).replace(",", " ").split())
        m = SIGNALLED.search(line)
        if m:
            self.signalled.append((int(m.group(1)), m.group(2), int(m.group(3))))
        m = links.REPORT_LINE.match(line)
        if m:
            self.slowest_link_gbps = float(m.group(1))
            self.links_at_once_gbps = float(m.group(2)) if m.group(2) else None
        if self.aborted_at is None and any(k in line for k in ABORT_MARKERS):
            self.aborted_at = time.monotonic()

    def findings(self):
        """What supervise.run's `report` says of the output (see there)."""
        return dict(
            aborted=self.aborted_at is not None,
            signalled=list(self.signalled),
            stall_abort=self.stall_abort,
            stalled=sorted(self.stalled),
            slowest_link_gbps=self.slowest_link_gbps,
            links_at_once_gbps=self.links_at_once_gbps,
        )
