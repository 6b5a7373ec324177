"""horovodrun's elastic mode: `horovodrun --min-np 2 --max-np 4 --host-discovery-script S ...`.

MPI cannot be initialized twice in a process and Open MPI 4.1 cannot shrink a communicator
after a failure, so the job is re-formed by relaunching it: each GENERATION is one mpirun over
the hosts known when it starts. A generation ends when its ranks finish (the job is done), when
a peer fails (the survivors exit for a relaunch; mpirun reports a rank killed; a host stops
answering), or when the discovery script lists new hosts (the ranks exit at their next commit).
The ranks keep their last commit in memory-backed files on their hosts, and the next
generation resumes from the newest one (horovod/common/elastic_worker.py), new hosts included.
Over --gloo (the TCP transport) the ranks re-form in their processes instead: a generation is
elastic_pool.Pool's, which starts processes only for the slots no survivor holds
(HOROVOD_ELASTIC_REFORM=relaunch: a launch of every rank per generation, as over MPI).

The driver: runs the discovery script every second in a thread (elastic_discovery.py: each call
bounded by DISCOVERY_TIMEOUT; its process group killed then and at the job's end); answers the
ranks' "have the hosts changed?" over HTTP (elastic_channel.py: rank 0 asks at each commit; a
per-job token guards it); after a failed generation, asks every host of it over ssh (bounded,
elastic_hosts.py) and blacklists those that do not answer (elastic_blacklist.py); waits at most
--elastic-timeout for --min-np slots; ends after --reset-limit resets.
"""

import secrets
import threading
import time
import uuid

from horovod.runner import elastic_hosts
from horovod.runner import hosts as hostlib
from horovod.runner.elastic_blacklist import Blacklist
from horovod.runner.elastic_channel import Channel
from horovod.runner.elastic_discovery import (  # noqa: F401  (parse_discovery, DISCOVERY_TIMEOUT: tests)
    DISCOVERY_INTERVAL,
    DISCOVERY_TIMEOUT,
    Discovery,
    DiscoveryError,
    discovery_words,
    parse_discovery,
)
from horovod.runner.supervise import _say

RELAUNCH_EXIT_CODE = 75  # horovod/common/elastic_worker.py


def log(text):
    _say(f"horovodrun: elastic: {text}")


class HostWatch:
    """What discovery lists (less the blacklisted hosts), polled every DISCOVERY_INTERVAL by
    watch() in a thread, against the running generation's hosts: `changed` once a host of it is
    gone or has fewer slots, or there are more slots and room to grow (the ranks re-form at
    their next commit)."""

    def __init__(self, args, blacklist):
        self.args = args
        self.blacklist = blacklist
        self.lock = threading.Lock()
        self.generation = 0
        self.current = []  # [(host, slots)] of the running generation
        self.np = 0
        self.changed = False  # the hosts differ from the running generation's
        self.latest = None  # the last discovery's usable hosts
        self.discovery_error = None
        self.discovery = Discovery(args.host_discovery_script, args.slots_per_host)
        self.stop = threading.Event()

    def usable(self, found):
        return [(h, s) for h, s in found if not self.blacklist.blocked(h)]

    def poll(self):
        try:
            found = self.usable(self.discovery())
            error = None
        except DiscoveryError as e:
            found, error = None, str(e)
        if self.stop.is_set():
            return  # the job is ending: a call cut short by close() says nothing
        with self.lock:
            before, self.discovery_error = self.discovery_error, error
            # Said once per change, not every second: a failing script stays failing.
            if error and error != before:
                log(
                    f"{discovery_words(error)}; "
                    + (
                        f"keeping the hosts it listed last ({hostlib.format_hosts(self.latest)})"
                        if self.latest
                        else "no hosts known yet"
                    )
                )
            elif before and not error:
                log("discovery answers again")
            if found is None:
                return
            self.latest = found
            if self.current and not self.changed:
                self._note_change(found)

    def _note_change(self, found):
        """Marks the running generation's hosts changed (with self.lock held) when a host of it
        is gone or has fewer slots, or there are more slots and room to grow."""
        now = dict(found)
        gone = [h for h, n in self.current if now.get(h, 0) < n]
        new = [h for h, _ in found if h not in dict(self.current)]
        more = sum(now.values()) > self.np
        room = self.args.max_np is None or self.np < self.args.max_np
        if gone or (more and room):
            self.changed = True
            what = [f"gone: {h}" if h not in now else f"fewer slots: {h}" for h in gone]
            if more and room:
                what.append(
                    f"{sum(now.values())} slots" + (f", new: {', '.join(new)}" if new else "")
                )
            log(
                f"generation {self.generation}: hosts changed ({'; '.join(what)}); "
                "the ranks re-form at their next commit"
            )

    def watch(self):
        while not self.stop.wait(DISCOVERY_INTERVAL):
            self.poll()

    def close(self):
        """Ends watch() and any discovery call in flight; a poll cut short says nothing."""
        self.stop.set()
        self.discovery.close()

    def wait_for_slots(self):
        """The usable hosts once they have >= --min-np slots, or None after --elastic-timeout."""
        found, slots, error = self.wait_until(
            self.args.min_np,
            self.args.elastic_timeout,
            lambda slots, error: log(
                f"waiting up to {self.args.elastic_timeout:g} s for {self.args.min_np} "
                f"slot(s); discovery lists {slots}"
                + (f" ({discovery_words(error)})" if error else "")
            ),
        )
        if slots >= self.args.min_np:
            return found
        log(
            f"needed {self.args.min_np} slot(s) (--min-np) but for "
            f"{self.args.elastic_timeout:g} s (--elastic-timeout) discovery listed "
            f"{slots}: {hostlib.format_hosts(found) if found else 'no host'}; "
            f"blacklisted: {self.blacklist.describe()}"
            + (f"; {discovery_words(error)}" if error else "")
            + "; ending the job"
        )
        return None

    def wait_until(self, needed, timeout, on_wait, interval=DISCOVERY_INTERVAL):
        """Polls discovery every `interval` s until the usable hosts have >= `needed` slots or
        `timeout` s passed: (hosts, their slots, the discovery error) of the last poll.
        on_wait(slots, error) is called once, when the first poll falls short."""
        deadline = time.monotonic() + timeout
        said = False
        while True:
            self.poll()
            with self.lock:
                found, error = self.latest or [], self.discovery_error
            slots = sum(s for _, s in found)
            if slots >= needed or time.monotonic() >= deadline:
                return found, slots, error
            if not said:
                on_wait(slots, error)
                said = True
            time.sleep(interval)

    def begin(self, hosts, np_):
        """The generation starting runs `np_` ranks on `hosts`: nothing has changed yet."""
        with self.lock:
            self.current, self.np, self.changed = hosts, np_, False

    def end(self):
        """The running generation ended: whether its hosts had changed. Between generations
        nothing is "changed"."""
        with self.lock:
            changed = self.changed
            self.current = []
        return changed

    def answer(self, asked):
        """Whether the hosts changed, for a rank of generation `asked` (a rank of an older one
        is told no: its generation is over)."""
        with self.lock:
            changed = self.changed and asked == str(self.generation)
            return {"changed": changed, "generation": self.generation}


class Driver:
    """Runs the generations one after another (launch_job each) until one finishes, the job
    is signalled, a generation fails on its own, or --reset-limit is passed."""

    def __init__(self, args, env, launch_job, place=None, close=None):
        self.launch_job = launch_job  # launch.launch_job: one mpirun (passed in: no import cycle)
        self.close_ranks = close  # ends ranks that outlive a generation (elastic_pool.Pool)
        self.args = args
        self.env = dict(env)
        self.blacklist = Blacklist(args.blacklist_cooldown_range)
        self.host_watch = HostWatch(args, self.blacklist)
        self.requests_lock = threading.Lock()
        self.relaunch_requests = []
        self.job_id = uuid.uuid4().hex[:12]
        self.token = secrets.token_hex(16)
        self.channel = Channel(self.token, self.host_watch.answer, self._record, place)

    @property
    def generation(self):  # kept by HostWatch: its log and the channel's answers name it
        return self.host_watch.generation

    @generation.setter
    def generation(self, value):
        self.host_watch.generation = value

    def _record(self, body):
        with self.requests_lock:
            self.relaunch_requests.append(body)

    # -- the generations ------------------------------------------------------------------
    def run(self):
        self.channel.start()
        resets, used_hosts = 0, set()
        watcher = None
        try:
            while True:
                found = self.host_watch.wait_for_slots()
                if found is None:
                    return 1
                hosts, env = self._next_generation(found)
                used_hosts.update(h for h, _ in hosts)
                if watcher is None:
                    watcher = threading.Thread(target=self.host_watch.watch, daemon=True)
                    watcher.start()
                started = time.monotonic()
                report = {}
                rc = self.launch_job(self.args, env, hosts, report)
                if rc == 0:
                    log(f"generation {self.generation} finished; the job is done")
                    return 0
                why, lost = self._why_ended(hosts, report)
                if report.get("signal"):
                    return rc  # horovodrun itself was told to stop
                if report.get("preflight_failed"):
                    if not lost:
                        return rc  # every host answers: the preflight's finding stands
                    self.generation += 1  # nothing ran: not a reset
                    continue
                if not why:
                    log(
                        f"generation {self.generation} failed (exit {rc}) without a lost peer "
                        "or host change: the script's own error; ending the job"
                    )
                    return rc
                resets += 1
                log(
                    f"generation {self.generation} ended after {time.monotonic() - started:.1f} s "
                    f"(exit {rc}): "
                    + "; ".join(why)
                    + f"; reset {resets}"
                    + (f" of {self.args.reset_limit}" if self.args.reset_limit else "")
                )
                if self.args.reset_limit is not None and resets > self.args.reset_limit:
                    log(
                        f"reset {resets} is over --reset-limit {self.args.reset_limit}; "
                        "ending the job"
                    )
                    return rc or 1
                self.generation += 1
        finally:
            if self.close_ranks is not None:  # before the commits go: none is written after
                self.close_ranks()
            self.host_watch.close()
            self.channel.shutdown()
            elastic_hosts.remove_commits(self.args, self.env, self.job_id, used_hosts)

    def _next_generation(self, found):
        """The hosts of the generation to start from the usable `found`, and its ranks'
        environment; said in the log."""
        slots = sum(s for _, s in found)
        np_ = min(slots, self.args.max_np or slots)
        if self.generation == 0 and self.args.np:
            np_ = min(np_, self.args.np)
        hosts = _fill(found, np_)
        self.host_watch.begin(hosts, np_)
        with self.requests_lock:
            self.relaunch_requests = []
        env = dict(self.env)
        env.update(
            HOROVOD_ELASTIC="1",
            HOROVOD_ELASTIC_JOB_ID=self.job_id,
            HOROVOD_ELASTIC_GENERATION=str(self.generation),
            HOROVOD_ELASTIC_DRIVER=self.channel.address_for(hosts),
            HOROVOD_ELASTIC_TOKEN=self.token,
        )
        log(f"generation {self.generation}: {np_} rank(s) on {hostlib.format_hosts(hosts)}")
        self.args.np = np_
        return hosts, env

    def _why_ended(self, hosts, report):
        """Why a generation failed, as said in the log: its hosts that no longer answer (now
        blacklisted), ranks killed or stalled, relaunch requests, a change of hosts. Returns
        (those reasons, {lost host: why})."""
        changed = self.host_watch.end()
        with self.requests_lock:
            requests = list(self.relaunch_requests)
        lost = elastic_hosts.unreachable(self.args, hosts)
        why = []
        for host, reason in lost.items():
            span = self.blacklist.add(host, f"lost in generation {self.generation}")
            why.append(
                f"lost {host} ({reason}; blacklisted "
                + ("for the rest of the job" if span == float("inf") else f"for {span:.0f} s")
                + ")"
            )
        signalled = report.get("signalled") or []
        why += [f"rank {r} on {h} killed by signal {s}" for r, h, s in signalled]
        if report.get("stall_abort"):
            why.append(_stalled_words(report.get("stalled") or [], hosts))
        if requests:
            asked = "to re-form" if requests[0].get("in_process") else "for a relaunch"
            why.append(
                f"{len(requests)} rank(s) asked {asked}: " + str(requests[0].get("reason", "?"))
            )
        if changed:
            why.append("the hosts changed")
        return why, lost


def _stalled_words(ranks, hosts):
    """Why a generation the ranks' watchdog aborted counts as a lost peer: a rank whose process
    stopped answering inside a collective (paused, hung). Its peers end by MPI_Abort, so no rank
    asks for a relaunch, and its host may still answer ssh (a process paused on a live host)."""
    placement = [h for h, s in hosts for _ in range(s)]
    named = [f"rank {r} on {placement[r]}" if r < len(placement) else f"rank {r}" for r in ranks]
    return (
        f"{', '.join(named) or 'a rank'} stopped answering inside a collective "
        "(the other ranks' watchdog aborted the generation)"
    )


def _fill(found, np_):
    """The hosts' slots, in order, cut to np_ processes."""
    out, left = [], np_
    for host, slots in found:
        if left <= 0:
            break
        take = min(slots, left)
        out.append((host, take))
        left -= take
    return out


def run(args, env, launch_job):
    from horovod.runner import elastic_pool

    if elastic_pool.in_process(args, env):  # --gloo: survivors re-form in their processes
        # Driver.run's own `finally` closes the pool (before the commit files go); until run
        # starts a generation the pool holds no process.
        pool = elastic_pool.Pool(args)
        return Driver(args, env, pool.launch_job, pool.place, pool.close).run()
    return Driver(args, env, launch_job).run()
