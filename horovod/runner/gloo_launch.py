"""horovodrun --gloo (alias --tcp): the ranks start without mpirun and form the job over the
engine's TCP transport, from upstream Horovod's Gloo variables (HOROVOD_RANK, ...,
HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT).

Why: a job then needs no MPI on the hosts, only ssh (as upstream's `horovodrun --gloo`).
How: ranks are placed like mpirun --map-by slot; the launcher serves the rendezvous itself
(horovod.runner.rendezvous, HOROVOD_RENDEZVOUS_SERVER=external) and starts every rank, as a
child on this host or through ssh on another; each rank's output is relayed line by line with
upstream's `[rank]<stdout>:` prefix; the first rank that fails ends the job with its code
(gloo_supervise.py sees the ranks through).

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
import shlex
import socket

from horovod.runner import hosts as hostlib
from horovod.runner import inherited, links, tcp_rank
from horovod.runner.gloo_supervise import (  # noqa: F401  (describe_exit, exit_signal: tests)
    GRACE_SECONDS,
    Job,
    describe_exit,
    exit_signal,
)
from horovod.runner.supervise import _say

# Variables never put on a command line: sent on the remote wrapper's stdin.
SECRET_NAMES = ("HOROVOD_SECRET_KEY", "HOROVOD_ELASTIC_TOKEN")

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
    return tcp_rank.rank_variables(slot, size, rendezvous, iface)


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


def prepare(args, env, hosts, report):
    """What starting ranks on `hosts` needs first: the preflight of remote hosts (and the known
    links into env), and each host's interface. (choice, ssh_args, {host: interface}), or the
    exit status when nothing can be launched (2: bad interface, 3: the preflight failed)."""
    from horovod.runner import network, preflight

    choice, ssh_args = None, []
    if any(not hostlib.is_local(h) for h, _ in hosts):
        try:
            _, choice, text, ssh_args = preflight.run_for_flags(args, hosts)
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
    return choice, ssh_args, ifaces


def serve_rendezvous(args, bind, size, secret):
    """A rendezvous for `size` ranks on `bind`, waiting for them up to the ranks' own timeout
    plus --start-timeout: (server, port), or the exit status (1) once said why not."""
    try:
        from horovod.runner.rendezvous import RendezvousServer
    except ImportError as e:
        _say(f"horovodrun: --gloo needs the rendezvous server, which is not importable ({e})")
        return 1
    server = RendezvousServer()
    try:
        port = server.start(bind, size, secret, rendezvous_timeout() + args.start_timeout)
    except Exception as e:  # the binding's error: name what could not be served
        _say(f"horovodrun: cannot serve the rendezvous on {bind or '0.0.0.0'}: {e}")
        return 1
    return server, port


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
    prepared = prepare(args, env, hosts, report)
    if isinstance(prepared, int):
        return prepared
    choice, ssh_args, ifaces = prepared
    bind, advertise = rendezvous_address(hosts, choice)
    secret = secrets.token_hex(32)
    served = serve_rendezvous(args, bind, np_, secret)
    if isinstance(served, int):
        return served
    server, port = served
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
