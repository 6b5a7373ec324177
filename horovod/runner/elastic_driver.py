"""horovodrun's elastic mode: `horovodrun --min-np 2 --max-np 4 --host-discovery-script S ...`.

MPI cannot be initialized twice in a process and Open MPI 4.1 cannot shrink a communicator
after a failure, so the job is re-formed by relaunching it: each GENERATION is one mpirun over
the hosts known when it starts. A generation ends when its ranks finish (the job is done), when
a peer fails (the survivors exit for a relaunch; mpirun reports a rank killed; a host stops
answering), or when the discovery script lists new hosts (the ranks exit at their next commit).
The ranks keep their last commit in memory-backed files on their hosts, and the next
generation resumes from the newest one (horovod/common/elastic_worker.py), new hosts included.

The driver: runs the discovery script every second in a thread (each call bounded by
DISCOVERY_TIMEOUT; its process group killed then and at the job's end); answers the ranks'
"have the hosts changed?" over HTTP (rank 0 asks at each commit; a per-job token guards it);
after a failed generation, asks every host of it over ssh (bounded) and blacklists those that do
not answer; waits at most --elastic-timeout for --min-np slots; ends after --reset-limit resets.
"""

import http.server
import json
import os
import random
import secrets
import shlex
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid

from horovod.runner import hosts as hostlib
from horovod.runner.supervise import _say

RELAUNCH_EXIT_CODE = 75  # horovod/common/elastic_worker.py
DISCOVERY_INTERVAL = 1.0
DISCOVERY_TIMEOUT = 10.0
PROBE_TIMEOUT = 5.0


def log(text):
    _say(f"horovodrun: elastic: {text}")


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


class Blacklist:
    def __init__(self, cooldown_range):
        self.cooldown = cooldown_range
        self.entries = {}  # host -> (until (monotonic; inf: for good), why)

    def add(self, host, why):
        span = random.uniform(*self.cooldown) if self.cooldown else float("inf")
        self.entries[host] = (time.monotonic() + span, why)
        return span

    def blocked(self, host):
        entry = self.entries.get(host)
        if entry and time.monotonic() >= entry[0]:
            del self.entries[host]
            log(f"{host} may be used again (its blacklist cooldown passed)")
            return False
        return entry is not None

    def describe(self):
        return ", ".join(f"{h} ({why})" for h, (_, why) in self.entries.items()) or "none"


class Driver:
    def __init__(self, args, env, launch_job):
        self.launch_job = launch_job  # launch.launch_job: one mpirun (passed in: no import cycle)
        self.args = args
        self.env = dict(env)
        self.blacklist = Blacklist(args.blacklist_cooldown_range)
        self.lock = threading.Lock()
        self.generation = 0
        self.current = []  # [(host, slots)] of the running generation
        self.np = 0
        self.changed = False  # the hosts differ from the running generation's
        self.relaunch_requests = []
        self.latest = None  # the last discovery's usable hosts
        self.discovery_error = None
        self.discovery = Discovery(args.host_discovery_script, args.slots_per_host)
        self.stop = threading.Event()
        self.job_id = uuid.uuid4().hex[:12]
        self.token = secrets.token_hex(16)

    # -- discovery ------------------------------------------------------------------------
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
                    f"{_discovery_words(error)}; "
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
                            f"{sum(now.values())} slots"
                            + (f", new: {', '.join(new)}" if new else "")
                        )
                    log(
                        f"generation {self.generation}: hosts changed ({'; '.join(what)}); "
                        "the ranks re-form at their next commit"
                    )

    def watch(self):
        while not self.stop.wait(DISCOVERY_INTERVAL):
            self.poll()

    def wait_for_slots(self):
        """The usable hosts once they have >= --min-np slots, or None after --elastic-timeout."""
        deadline = time.monotonic() + self.args.elastic_timeout
        said = False
        while True:
            self.poll()
            with self.lock:
                found, error = self.latest or [], self.discovery_error
            slots = sum(s for _, s in found)
            if slots >= self.args.min_np:
                return found
            if time.monotonic() >= deadline:
                log(
                    f"needed {self.args.min_np} slot(s) (--min-np) but for "
                    f"{self.args.elastic_timeout:g} s (--elastic-timeout) discovery listed "
                    f"{slots}: {hostlib.format_hosts(found) if found else 'no host'}; "
                    f"blacklisted: {self.blacklist.describe()}"
                    + (f"; {_discovery_words(error)}" if error else "")
                    + "; ending the job"
                )
                return None
            if not said:
                log(
                    f"waiting up to {self.args.elastic_timeout:g} s for {self.args.min_np} "
                    f"slot(s); discovery lists {slots}"
                    + (f" ({_discovery_words(error)})" if error else "")
                )
                said = True
            time.sleep(DISCOVERY_INTERVAL)

    # -- the ranks' channel -----------------------------------------------------------------
    def serve(self):
        driver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _allowed(self):
                if self.headers.get("X-Horovod-Token") == driver.token:
                    return True
                self._reply(403, {"error": "bad token"})
                return False

            def do_GET(self):  # noqa: N802  (http.server's name)
                if not self._allowed():
                    return
                url = urllib.parse.urlparse(self.path)
                query = urllib.parse.parse_qs(url.query)
                with driver.lock:
                    same = query.get("generation", [""])[0] == str(driver.generation)
                    changed = driver.changed and same
                self._reply(200, {"changed": changed, "generation": driver.generation})

            def do_POST(self):  # noqa: N802
                if not self._allowed():
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                with driver.lock:
                    driver.relaunch_requests.append(body)
                self._reply(200, {})

            def log_message(self, *a):  # quiet: the driver logs what matters
                pass

        self.server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def address_for(self, hosts):
        """host:port of the driver as the ranks on `hosts` reach it."""
        port = self.server.server_address[1]
        remote = [h for h, _ in hosts if not hostlib.is_local(h)]
        if not remote:
            return f"127.0.0.1:{port}"
        try:  # the address this machine sends from towards the first remote host
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((socket.gethostbyname(remote[0]), 9))
                return f"{s.getsockname()[0]}:{port}"
        except OSError:
            return f"{socket.gethostname()}:{port}"

    # -- hosts that failed ----------------------------------------------------------------
    def ssh_args(self):
        from horovod.runner import preflight

        return preflight.ssh_base(
            self.args.ssh_port, self.args.ssh_identity_file, int(PROBE_TIMEOUT)
        )

    def unreachable(self, hosts):
        """{host: why} of `hosts` that no longer answer over ssh within PROBE_TIMEOUT."""
        remote = [h for h, _ in hosts if not hostlib.is_local(h)]
        out = {}

        def probe(host):
            try:
                p = subprocess.run(
                    ["ssh", *self.ssh_args(), host, "true"],
                    capture_output=True,
                    text=True,
                    timeout=PROBE_TIMEOUT + 1,
                    stdin=subprocess.DEVNULL,
                )
                if p.returncode != 0:
                    out[host] = (p.stderr.strip().splitlines() or ["ssh failed"])[-1][:200]
            except subprocess.TimeoutExpired:
                out[host] = f"no answer over ssh within {PROBE_TIMEOUT:g} s (paused or cut off?)"

        threads = [threading.Thread(target=probe, args=(h,)) for h in remote]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def cleanup(self, hosts):
        """Removes the job's commit files on every host it ran on, and the store's folder if no
        other job uses it (rmdir fails on a folder in use; best effort, bounded)."""
        root = self.env.get("HOROVOD_ELASTIC_STORE", "/dev/shm/horovod-elastic")
        path = os.path.join(root, self.job_id)
        cmd = f"rm -rf {shlex.quote(path)}; rmdir {shlex.quote(root)} 2>/dev/null; true"
        procs = []
        for host in sorted(set(hosts)):
            argv = (
                ["sh", "-c", cmd]
                if hostlib.is_local(host)
                else ["ssh", *self.ssh_args(), host, cmd]
            )
            procs.append(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = time.monotonic() + PROBE_TIMEOUT
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()

    # -- the generations ------------------------------------------------------------------
    def run(self):
        self.serve()
        resets, used_hosts = 0, set()
        watcher = None
        try:
            while True:
                found = self.wait_for_slots()
                if found is None:
                    return 1
                slots = sum(s for _, s in found)
                np_ = min(slots, self.args.max_np or slots)
                if self.generation == 0 and self.args.np:
                    np_ = min(np_, self.args.np)
                hosts = _fill(found, np_)
                with self.lock:
                    self.current, self.np, self.changed = hosts, np_, False
                    self.relaunch_requests = []
                used_hosts.update(h for h, _ in hosts)
                env = dict(self.env)
                env.update(
                    HOROVOD_ELASTIC="1",
                    HOROVOD_ELASTIC_JOB_ID=self.job_id,
                    HOROVOD_ELASTIC_GENERATION=str(self.generation),
                    HOROVOD_ELASTIC_DRIVER=self.address_for(hosts),
                    HOROVOD_ELASTIC_TOKEN=self.token,
                )
                log(f"generation {self.generation}: {np_} rank(s) on {hostlib.format_hosts(hosts)}")
                if watcher is None:
                    watcher = threading.Thread(target=self.watch, daemon=True)
                    watcher.start()
                self.args.np = np_
                started = time.monotonic()
                report = {}
                rc = self.launch_job(self.args, env, hosts, report)
                if rc == 0:
                    log(f"generation {self.generation} finished; the job is done")
                    return 0
                with self.lock:
                    changed, requests = self.changed, list(self.relaunch_requests)
                    self.current = []  # between generations nothing is "changed"
                lost = self.unreachable(hosts)
                why = []
                for host, reason in lost.items():
                    span = self.blacklist.add(host, f"lost in generation {self.generation}")
                    why.append(
                        f"lost {host} ({reason}; blacklisted "
                        + (
                            "for the rest of the job"
                            if span == float("inf")
                            else f"for {span:.0f} s"
                        )
                        + ")"
                    )
                signalled = report.get("signalled") or []
                why += [f"rank {r} on {h} killed by signal {s}" for r, h, s in signalled]
                if report.get("stall_abort"):
                    why.append(_stalled_words(report.get("stalled") or [], hosts))
                if requests:
                    why.append(
                        f"{len(requests)} rank(s) asked for a relaunch: "
                        + str(requests[0].get("reason", "?"))
                    )
                if changed:
                    why.append("the hosts changed")
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
            self.stop.set()
            self.discovery.close()
            self.server.shutdown()
            self.cleanup(used_hosts)


def _discovery_words(error):
    return ("discovery " if error.startswith("timed out") else "discovery failed: ") + error


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
    return Driver(args, env, launch_job).run()
