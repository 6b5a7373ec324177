"""horovodrun --gloo (alias --tcp): the ranks start without mpirun and form the job over the
engine's TCP transport, from upstream Horovod's Gloo variables (HOROVOD_RANK, ...,
HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT).

Why: a job then needs no MPI on the hosts, only ssh (as upstream's `horovodrun --gloo`).
How: ranks are placed like mpirun --map-by slot; the launcher serves the rendezvous itself
(horovod.runner.rendezvous, HOROVOD_RENDEZVOUS_SERVER=external) and starts every rank, as a
child on this host or through ssh on another; each rank's output is relayed line by line with
upstream's `[rank]<stdout>:` prefix; the first rank that fails ends the job with its code.

Secrets: the job's HOROVOD_SECRET_KEY (fresh per job; every connection proves it by HMAC) and the
elastic driver's token never go on a command line (ps shows argv): local ranks get them in their
environment, remote ranks on ssh's stdin, read by a small Python wrapper (REMOTE_WRAPPER). The
wrapper also ends the rank's process group when that stdin closes (horovodrun stopping the job,
horovodrun killed, the connection lost): sshd without a tty passes no signal on.
"""

import collections
import json
import os
import secrets
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import time

from horovod.runner import hosts as hostlib
from horovod.runner import inherited, links
from horovod.runner.supervise import _STALL_ABORT, _WAITING_FOR, _say

# Variables never put on a command line: sent on the remote wrapper's stdin.
SECRET_NAMES = ("HOROVOD_SECRET_KEY", "HOROVOD_ELASTIC_TOKEN")
# SIGTERM to a rank, then this long before SIGKILL.
GRACE_SECONDS = 5.0
# A remote rank's ssh gets this much more: its wrapper does the SIGTERM/SIGKILL over there.
SSH_EXTRA_SECONDS = 5.0
PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # to horovodrun: ends the job

# Runs on the remote host as `python3 -c REMOTE_WRAPPER program args...`: its first stdin line is
# a JSON object of secret variables; the program runs in a process group of its own, which gets
# SIGTERM, then SIGKILL after the grace, once stdin closes. Exits with the program's status.
REMOTE_WRAPPER = f"""\
import json, os, signal, subprocess, sys, threading, time
env = dict(os.environ)
env.update(json.loads(sys.stdin.readline() or "{{}}"))
p = subprocess.Popen(sys.argv[1:], env=env, stdin=subprocess.DEVNULL, start_new_session=True)
closed = threading.Event()
def watch():
    sys.stdin.read()
    closed.set()
    for sig, pause in ((signal.SIGTERM, {GRACE_SECONDS}), (signal.SIGKILL, 0)):
        try:
            os.killpg(p.pid, sig)
        except OSError:
            return
        time.sleep(pause)
threading.Thread(target=watch, daemon=True).start()
rc = p.wait()
if closed.is_set():
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
sys.exit(rc if rc >= 0 else 128 - rc)
"""

Slot = collections.namedtuple("Slot", "rank host local_rank local_size cross_rank cross_size")
# One rank's start: argv, its environment, what goes on its stdin (remote: the secrets), and
# the line --verbose prints (no secret in it).
Launch = collections.namedtuple("Launch", "slot argv env stdin remote shown")


def check_args(parser, args):
    """Usage errors of --gloo with flags that only mean something to mpirun."""
    for given, flag in (
        (args.mpi_args, "--mpi-args"),
        (args.mpirun is not None, "--mpirun"),
        (args.mpi, "--mpi"),
        (args.check_network, "--check-network"),
    ):
        if given:
            parser.error(
                f"{flag} is for the mpirun launch; --gloo/--tcp starts the ranks without "
                "mpirun (drop one of them)"
            )


def placement(hosts, np_):
    """[Slot] per rank under --map-by slot: each host's slots filled in turn. Cross rank: the
    host's index among the hosts that have this local rank; cross size: how many have it."""
    names = [h for h, s in hosts for _ in range(s)][:np_]
    local_size = collections.Counter(names)
    order = list(local_size)  # hosts in order of first rank
    slots, seen = [], {}
    for rank, host in enumerate(names):
        local = seen.get(host, 0)
        seen[host] = local + 1
        peers = [h for h in order if local_size[h] > local]
        slots.append(Slot(rank, host, local, local_size[host], peers.index(host), len(peers)))
    return slots


def rank_env(slot, size, rendezvous, iface=None):
    """The variables one rank reads (upstream's names); the secret is added apart."""
    addr, port = rendezvous
    env = {
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_HOSTNAME": slot.host,
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_RENDEZVOUS_SERVER": "external",
        "HOROVOD_TRANSPORT": "tcp",
    }
    if iface:
        env["HOROVOD_GLOO_IFACE"] = iface
    return env


def remote_command(command, variables, cwd):
    """The shell command ssh runs for one rank: into the launcher's directory if the host has
    it (as mpirun does), `variables` set, the program under REMOTE_WRAPPER."""
    assigns = [f"{k}={v}" for k, v in variables.items()]
    argv = ["env", *assigns, "python3", "-c", REMOTE_WRAPPER, *command]
    return f"cd {shlex.quote(cwd)} 2>/dev/null; exec {shlex.join(argv)}"


def rank_launch(args, env, slot, size, rendezvous, iface, secret, ssh_args, cwd=None):
    """How to start one rank: a child process here, or ssh to a remote host."""
    own = rank_env(slot, size, rendezvous, iface)
    hidden = {k: env[k] for k in SECRET_NAMES if k in env}
    hidden["HOROVOD_SECRET_KEY"] = secret
    if hostlib.is_local(slot.host):
        shown = shlex.join([f"{k}={v}" for k, v in own.items()] + list(args.command))
        return Launch(slot, list(args.command), {**env, **own, **hidden}, None, False, shown)
    names = [k for k in inherited.forwarded(env) if k not in SECRET_NAMES and k not in own]
    variables = {**{k: env[k] for k in names}, **own}
    cmd = remote_command(args.command, variables, cwd or os.getcwd())
    argv = ["ssh", *ssh_args, "-T", slot.host, cmd]
    ssh_env = {k: v for k, v in env.items() if k not in SECRET_NAMES}
    stdin = (json.dumps(hidden) + "\n").encode()
    return Launch(slot, argv, ssh_env, stdin, True, shlex.join(argv))


def rendezvous_address(hosts, choice=None):
    """(address the server binds, address the ranks are told): loopback when every host is
    this one; else the launcher's address on the network the preflight chose, or (the launcher
    is not on it) every interface, told as the address facing the first remote host."""
    remote = [h for h, _ in hosts if not hostlib.is_local(h)]
    if not remote:
        return "127.0.0.1", "127.0.0.1"
    if choice is not None and choice.launcher_iface is not None:
        ip = str(choice.launcher_iface.ip)
        return ip, ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(remote[0]), 9))  # no packet sent: routing only
            return "", s.getsockname()[0]
    except OSError:
        return "", socket.gethostname()


def interfaces(hosts, choice, nics):
    """{host: interface its ranks bind (HOROVOD_GLOO_IFACE)}: the preflight's choice, or on
    this host alone --network-interface resolved here (a subnet becomes the name). Raises
    network.NetworkError when the host has no such interface."""
    if choice is not None:
        return {h: name for h, (name, _) in choice.per_host.items()}
    if not nics:
        return {}
    from horovod.runner import network, probe

    me = {"interfaces": probe.interfaces()}
    name = network.choose({"this host": me}, {}, me, nics).per_host["this host"][0]
    return {h: name for h, _ in hosts}


def rendezvous_timeout():
    """The ranks' rendezvous timeout (HOROVOD_RENDEZVOUS_TIMEOUT as the engine parses it; a bad
    value raises ValueError naming it)."""
    from horovod.common.basics import config_values

    return float(config_values()["HOROVOD_RENDEZVOUS_TIMEOUT"])


def launch_job(args, env, hosts, report=None):
    """Preflight (remote hosts), the rendezvous, then every rank on `hosts` ([(host, slots)]
    or None: this host), supervised; returns the job's exit status (2: bad placement or
    interface, 3: the preflight failed; nothing was launched). Same signature and `report` as
    launch.launch_job, so that elastic_driver runs generations with either."""
    report = {} if report is None else report
    hosts = hosts or [("localhost", args.np or inherited.usable_cpus())]
    total = sum(s for _, s in hosts)
    np_ = args.np or total
    if np_ > total:
        _say(
            f"horovodrun: -np {np_} but the hosts have {total} slots "
            f"({hostlib.format_hosts(hosts)}); give fewer processes or more slots"
        )
        return 2
    from horovod.runner import network, preflight

    choice, ssh_args = None, []
    if any(not hostlib.is_local(h) for h, _ in hosts):
        ssh_args = preflight.ssh_base(
            args.ssh_port, args.ssh_identity_file, min(10.0, args.start_timeout)
        )
        local = {h: hostlib.is_local(h) for h, _ in hosts}
        try:
            _, choice, text = preflight.run(hosts, local, ssh_args, args.start_timeout, args.nics)
        except preflight.PreflightFailed as e:
            _say(str(e))
            report["preflight_failed"] = True
            return 3
        _say(text)
        if "HOROVOD_LINK_GBPS" not in env:
            known = links.load(hosts)
            if known:
                env["HOROVOD_LINK_GBPS"] = f"{known['slowest_gbps']:g}"
                _say(links.describe(known))
    try:
        ifaces = interfaces(hosts, choice, args.nics)
    except network.NetworkError as e:
        _say(f"horovodrun: {e}")
        return 2
    try:
        from horovod.runner.rendezvous import RendezvousServer
    except ImportError as e:
        _say(f"horovodrun: --gloo needs the rendezvous server, which is not importable ({e})")
        return 1
    bind, advertise = rendezvous_address(hosts, choice)
    secret = secrets.token_hex(32)
    server = RendezvousServer()
    try:
        port = server.start(bind, np_, secret, rendezvous_timeout() + args.start_timeout)
    except Exception as e:  # the binding's error: name what could not be served
        _say(f"horovodrun: cannot serve the rendezvous on {bind or '0.0.0.0'}: {e}")
        return 1
    try:
        starts = [
            rank_launch(
                args, env, slot, np_, (advertise, port), ifaces.get(slot.host), secret, ssh_args
            )
            for slot in placement(hosts, np_)
        ]
        if args.verbose:
            _say(f"horovodrun: rendezvous at {advertise}:{port} (bound to {bind or '0.0.0.0'})")
            for s in starts:
                _say(f"horovodrun: rank {s.slot.rank}: {s.shown}")
        return Job(starts).run(report)
    finally:
        server.stop()


def _preexec(parent):
    """A rank (or its ssh) gets SIGKILL when horovodrun dies, even by SIGKILL."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec():
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # horovodrun died before prctl
            os._exit(1)

    return preexec


class _Rank:
    def __init__(self, start, proc):
        self.start, self.proc = start, proc
        self.slot = start.slot
        self.rc = None
        self.killed = False


class Job:
    """Starts the ranks and sees them through: relays their output, prefixed; on the first
    rank that fails, or a signal to horovodrun, stops the rest (SIGTERM, SIGKILL after
    GRACE_SECONDS; a second signal: SIGKILL at once)."""

    def __init__(self, starts):
        self.starts = starts
        self.ranks = []
        self.selector = selectors.DefaultSelector()
        self.signals = []
        self.failed = None  # the first rank that exited non-zero
        self.stopping_since = None
        self.stall_abort, self.stalled = False, set()

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
            self._drain(2.0)
        return self._finish(report)

    def _spawn(self, start):
        proc = subprocess.Popen(
            start.argv,
            env=start.env,
            stdin=subprocess.PIPE if start.remote else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_preexec(os.getpid()),
        )
        rank = _Rank(start, proc)
        self.ranks.append(rank)
        if start.remote:
            try:
                proc.stdin.write(start.stdin)
                proc.stdin.flush()
            except OSError:  # ssh already gone: its exit status says why
                pass
        for src, dst, tag in (
            (proc.stdout, sys.stdout, "stdout"),
            (proc.stderr, sys.stderr, "stderr"),
        ):
            os.set_blocking(src.fileno(), False)
            prefix = f"[{start.slot.rank}]<{tag}>:".encode()
            self.selector.register(src, selectors.EVENT_READ, (dst, prefix, bytearray()))

    def _on_signal(self, signum, _frame):
        self.signals.append(signum)

    def _supervise(self):
        while True:
            self._pump(0.2)
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

    def _pump(self, timeout):
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

    def _drain(self, timeout):
        deadline = time.monotonic() + timeout
        while self.selector.get_map() and time.monotonic() < deadline:
            self._pump(0.1)
        for key in list(self.selector.get_map().values()):  # a leftover still holds a pipe
            self.selector.unregister(key.fileobj)
            key.fileobj.close()

    def _line(self, dst, prefix, line):
        text = line.decode(errors="replace")
        m = _WAITING_FOR.search(text)
        if _STALL_ABORT in text:
            self.stall_abort = True
            if m:
                self.stalled.update(int(r) for r in m.group(1).replace(",", " ").split())
        try:
            dst.buffer.write(prefix + line + b"\n")
            dst.flush()
        except (OSError, ValueError, AttributeError):
            pass  # our output is gone: keep draining the ranks'

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
            stall_abort=self.stall_abort,
            stalled=sorted(self.stalled),
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
