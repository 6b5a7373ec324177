"""horovodrun --gloo's elastic mode re-forms the job in process: the rank processes outlive
their generation. Over TCP a process can shut its engine down and init again into a new world
(the engine re-forms there; MPI cannot), so a survivor keeps its Python state, model and
imports, and only the slots nobody holds start a new process.

The Pool stands in for gloo_launch.launch_job in elastic_driver's generations (same signature
and report). For each generation it places the living processes first (each on its own host, in
the order of their last ranks; map-by-slot as gloo_launch.placement), starts a process for each
slot left, serves that generation's rendezvous, and answers each process's request for its
place (Channel's GET /place, a long poll): its rank variables and the rendezvous, or "exit" for
a process the new world has no slot for. A generation ends when all its ranks have exited 0
(the job is done), when one fails or is killed (the others get HorovodInternalError and ask for
their places), or when one asks for a place in the next one (the hosts changed at a commit; an
init that failed). What is left of the job when the driver ends goes with close() (SIGTERM,
SIGKILL after the grace). HOROVOD_ELASTIC_REFORM=relaunch keeps the relaunch of every process
per generation (gloo_launch.launch_job), as over MPI.
"""

import secrets
import signal
import threading
import time

from horovod.runner import gloo_launch
from horovod.runner.gloo_supervise import (
    GRACE_SECONDS,
    SSH_EXTRA_SECONDS,
    STOP_SIGNALS,
    _killpg,
    _PrefixedOutput,
    describe_exit,
    exit_signal,
    start_rank_process,
)
from horovod.runner.job_output import OutputScan
from horovod.runner.supervise import _say

RELAUNCH_EXIT_CODE = 75  # horovod/common/elastic_worker.py
PLACE_WAIT_SECONDS = 20.0  # one /place request waits this long, then the rank asks again


def in_process(args, env):
    """Whether this elastic job re-forms in process: over --gloo, unless
    HOROVOD_ELASTIC_REFORM=relaunch."""
    return bool(getattr(args, "gloo", False)) and env.get("HOROVOD_ELASTIC_REFORM") != "relaunch"


class Worker:
    """One rank process, across the generations it lives through."""

    def __init__(self, wid, slot, proc, remote, renumber):
        self.id, self.slot, self.proc, self.remote = wid, slot, proc, remote
        self.renumber = renumber  # changes its output's rank prefix
        self.rc = None
        self.killed = False
        self.leaving = False  # the running generation has no slot for it: told to exit


class Pool:
    def __init__(self, args):
        self.args = args
        self.secret = secrets.token_hex(32)  # the job's, for every generation's connections
        self.workers = []
        self.members = []  # the running generation's workers
        self.cond = threading.Condition()
        self.generation = -1
        self.places = {}  # worker id -> its /place answer for self.generation
        self.asked = set()  # members that asked for a place after self.generation
        self.closed = False
        self.output = _PrefixedOutput()
        self.io_lock = threading.Lock()  # the selector: registered here, pumped by _watch
        self.watcher = None
        self.signals = []

    # -- the channel's side: a rank asks for its place -----------------------------------------
    def place(self, worker, after, wait=PLACE_WAIT_SECONDS):
        """The place of process `worker` in the first generation after `after`, once the driver
        has one: {"env", "rank", "size", "generation"}, {"exit": True, "why"}, or {"wait": True}
        after `wait` s (the rank asks again, within its own bound)."""
        deadline = time.monotonic() + wait
        with self.cond:
            if after >= self.generation:  # it left the running generation: that one is over
                self.asked.add(worker)
                self.cond.notify_all()
            while self.generation <= after and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"wait": True}
                self.cond.wait(left)
            if self.closed:
                return {"exit": True, "why": "the job is ending"}
            return self.places.get(
                worker, {"exit": True, "why": f"generation {self.generation} has no slot for it"}
            )

    # -- one generation (elastic_driver's launch_job) ------------------------------------------
    def launch_job(self, args, env, hosts, report):
        """Runs generation env["HOROVOD_ELASTIC_GENERATION"] on `hosts` until it ends; returns
        0 when its ranks finished, else the failed rank's status or RELAUNCH_EXIT_CODE, with
        `report` as gloo_supervise.Job's."""
        gen = int(env["HOROVOD_ELASTIC_GENERATION"])
        np_ = args.np or sum(s for _, s in hosts)
        prepared = gloo_launch.prepare(args, env, hosts, report)
        if isinstance(prepared, int):
            return prepared
        choice, ssh_args, ifaces = prepared
        bind, advertise = gloo_launch.rendezvous_address(hosts, choice)
        served = gloo_launch.serve_rendezvous(args, bind, np_, self.secret)
        if isinstance(served, int):
            return served
        server, port = served
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            slots = gloo_launch.placement(hosts, np_)
            new_slots = self._place_survivors(gen, slots, np_, (advertise, port), ifaces)
            for slot in new_slots:
                self._spawn(args, env, slot, np_, (advertise, port), ifaces, ssh_args, gen)
            self._start_watch()
            return self._wait_for_end(report)
        finally:
            server.stop()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _place_survivors(self, gen, slots, size, rendezvous, ifaces):
        """Gives the living processes their slots of generation `gen` (on their own host, in the
        order of their last ranks) and publishes every place; returns the slots left."""
        with self.cond:
            by_host = {}
            for w in sorted(self._alive(), key=lambda w: w.slot.rank):
                by_host.setdefault(w.slot.host, []).append(w)
            places, members, left = {}, [], []
            for slot in slots:
                queue = by_host.get(slot.host)
                if not queue:
                    left.append(slot)
                    continue
                w = queue.pop(0)
                own = gloo_launch.rank_env(slot, size, rendezvous, ifaces.get(slot.host))
                own["HOROVOD_ELASTIC_GENERATION"] = str(gen)
                places[w.id] = {"env": own, "rank": slot.rank, "size": size, "generation": gen}
                w.slot = slot
                w.renumber(slot.rank)
                members.append(w)
            for queue in by_host.values():
                for w in queue:
                    w.leaving = True
            self.generation, self.places, self.members = gen, places, members
            self.asked = set()
            self.cond.notify_all()
        with self.io_lock:
            self.output.scan = OutputScan()  # what this generation's ranks say
        return left

    def _alive(self):
        return [w for w in self.workers if w.rc is None and not w.leaving and not w.killed]

    def _spawn(self, args, env, slot, size, rendezvous, ifaces, ssh_args, gen):

        wid = len(self.workers)
        extra = {
            "HOROVOD_ELASTIC_REFORM": "process",
            "HOROVOD_ELASTIC_WORKER": str(wid),
            # The rank waits for its next place at most this long: the driver's own bound.
            "HOROVOD_ELASTIC_PLACE_TIMEOUT": f"{args.elastic_timeout + 60:g}",
        }
        start = gloo_launch.rank_launch(
            args,
            {**env, **extra},
            slot,
            size,
            rendezvous,
            ifaces.get(slot.host),
            self.secret,
            ssh_args,
        )
        if args.verbose:
            _say(f"horovodrun: rank {slot.rank} (generation {gen}, new process): {start.shown}")
        proc = start_rank_process(start)
        with self.io_lock:
            renumber = self.output.add(slot.rank, proc)
        w = Worker(wid, slot, proc, start.remote, renumber)
        with self.cond:
            self.workers.append(w)
            self.members.append(w)

    def _start_watch(self):
        if self.watcher is None:
            self.watcher = threading.Thread(target=self._watch, daemon=True)
            self.watcher.start()

    def _watch(self):
        """Relays the processes' output and notes their exits, until close()."""
        while not self.closed:
            with self.io_lock:
                self.output.pump(0.05)
            with self.cond:
                self._note_exits()
            time.sleep(0.01)

    def _note_exits(self):
        """Notes the exit status of every process that ended (under self.cond)."""
        for w in self.workers:
            if w.rc is None and w.proc.poll() is not None:
                w.rc = w.proc.returncode
                self.cond.notify_all()

    def _on_signal(self, signum, _frame):
        self.signals.append(signum)

    def _wait_for_end(self, report):
        """Waits until the running generation ends; fills `report`, returns its status."""
        failed, asked = None, False
        with self.cond:
            while not self.signals:
                # The watcher notes exits every ~60 ms; a survivor's request to re-form after a
                # peer was killed can arrive first, and the killed rank must still be named.
                self._note_exits()
                done = [w for w in self.members if w.rc is not None]
                bad = [w for w in done if w.rc != 0]
                if bad:
                    failed = bad[0]
                    break
                if len(done) == len(self.members):
                    break
                if self.asked & {w.id for w in self.members}:
                    asked = True
                    break
                self.cond.wait(0.2)
        with self.io_lock:
            scan = self.output.scan
        signalled = []
        if failed is not None:
            sig = exit_signal(failed.rc, failed.remote)
            if sig:
                signalled.append((failed.slot.rank, failed.slot.host, sig))
            _say(f"horovodrun: {describe_exit(failed.slot, failed.rc, failed.remote)}")
        report.update(
            aborted=failed is not None,
            signalled=signalled,
            stall_abort=scan.stall_abort,
            stalled=sorted(scan.stalled),
            signal=self.signals[0] if self.signals else None,
            slowest_link_gbps=None,
            links_at_once_gbps=None,
        )
        if self.signals:
            _say(f"horovodrun: {signal.Signals(self.signals[0]).name}: stopping the ranks")
            self.close()
            return 128 + self.signals[0]
        if failed is not None:
            return failed.rc if failed.rc >= 0 else 128 - failed.rc
        return RELAUNCH_EXIT_CODE if asked else 0

    # -- the end of the job --------------------------------------------------------------------
    def close(self):
        """Ends every process still running (SIGTERM, SIGKILL after the grace; a remote rank's
        wrapper does it over there once its stdin closes), relays what they said last, and
        answers the places still asked for with "exit"."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
        if self.watcher is not None:
            self.watcher.join()
        running = [w for w in self.workers if w.proc.poll() is None]
        for w in running:
            if w.remote:
                try:
                    w.proc.stdin.close()
                except OSError:
                    pass
            else:
                _killpg(w.proc.pid, signal.SIGTERM)
        start = time.monotonic()
        while any(w.proc.poll() is None for w in running):
            self.output.pump(0.1)
            for w in running:
                limit = GRACE_SECONDS + (SSH_EXTRA_SECONDS if w.remote else 0)
                if w.proc.poll() is None and time.monotonic() - start > limit and not w.killed:
                    w.killed = True
                    _killpg(w.proc.pid, signal.SIGKILL)
        for w in self.workers:
            w.proc.wait()
            if w.proc.stdin:
                w.proc.stdin.close()
        self.output.drain(2.0)
