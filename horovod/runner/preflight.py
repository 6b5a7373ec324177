"""Preflight: before mpirun starts anything, ask every host over ssh what it has.

One line per host: ssh reachable (or the exact ssh error and its fix), horovod / Python /
TensorFlow / Open MPI versions equal to the launcher's, /dev/shm size, the interface the job
will use.  All hosts are asked at once; the whole check is bounded by --start-timeout, so a
host that never answers is named instead of waited on.
"""

import concurrent.futures
import json
import socket
import subprocess
import time

from horovod.runner import hosts as hostlib
from horovod.runner import network, probe

VERSION_KEYS = (
    ("horovod", "horovod"),
    ("python", "python"),
    ("tensorflow", "tensorflow"),
    ("openmpi", "open-mpi"),
)


class PreflightFailed(Exception):
    """The launch must not start; str() is the full report."""


def ssh_base(port=None, identity=None, connect_timeout=10):
    """ssh options shared by the preflight and by mpirun's daemons (plm_rsh_args)."""
    args = [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        f"ConnectTimeout={max(1, int(connect_timeout))}",
    ]
    if port:
        args += ["-p", str(port)]
    if identity:
        args += ["-i", identity]
    return args


def _fix_for(host, stderr, port, identity):
    """(what went wrong, how to fix it) from ssh's own error text."""
    port_text = port or "22 (or ssh_config's)"
    key = identity or "your default key (~/.ssh/id_*)"
    table = [
        (
            "Could not resolve hostname",
            f"check the name {host!r} in -H/--hostfile (DNS, /etc/hosts)",
        ),
        (
            "Name or service not known",
            f"check the name {host!r} in -H/--hostfile (DNS, /etc/hosts)",
        ),
        (
            "Connection refused",
            f"start sshd on {host}, or give the port it listens on with "
            f"-p/--ssh-port (tried {port_text})",
        ),
        (
            "timed out",
            f"{host} does not answer on port {port_text}: check that it is up and that "
            "no firewall blocks the port",
        ),
        ("No route to host", f"{host} is unreachable from the launcher: check the network"),
        (
            "Permission denied",
            f"authorize {key} for this user on {host} "
            "(~/.ssh/authorized_keys), or give the right key with -i/--ssh-identity-file",
        ),
        (
            "Host key verification failed",
            f"{host}'s host key changed: remove it from ~/.ssh/known_hosts",
        ),
        ("Identity file", f"the key file {identity} cannot be read on the launcher"),
        ("bad permissions", f"chmod 600 {identity}"),
        (
            "Connection closed",
            f"sshd on {host} closed the connection: check its log (MaxStartups?)",
        ),
    ]
    for needle, fix in table:
        if needle.lower() in stderr.lower():
            return fix
    return f"run `ssh {host} true` by hand to see why"


class HostReport:
    def __init__(self, host, slots):
        self.host, self.slots = host, slots
        self.probe = None
        self.seconds = None
        self.errors = []  # (what, fix)
        self.warnings = []  # (what, fix)
        self.interface = None

    @property
    def ok(self):
        return self.probe is not None and not self.errors


def ask(host, slots, ssh_args, timeout, local):
    """Run the probe on host (locally if it is this machine); fill a HostReport."""
    rep = HostReport(host, slots)
    start = time.monotonic()
    if local:
        rep.probe = probe.probe()
        rep.seconds = time.monotonic() - start
        return rep
    try:
        socket.getaddrinfo(host, None, socket.AF_INET)
    except socket.gaierror as e:
        rep.errors.append(
            (
                f"host name does not resolve at the launcher ({e.strerror})",
                f"check the name {host!r} in -H/--hostfile (DNS, /etc/hosts)",
            )
        )
        return rep
    source = open(probe.__file__.replace(".pyc", ".py")).read()
    cmd = ["ssh", *ssh_args, host, "python3", "-"]
    try:
        res = subprocess.run(cmd, input=source, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        rep.errors.append(
            (
                f"no answer within {timeout:.0f} s (ssh {host})",
                f"check that {host} is up and its sshd answers; raise --start-timeout "
                "if it is only slow",
            )
        )
        return rep
    rep.seconds = time.monotonic() - start
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("HOROVOD_PROBE ")), None)
    if res.returncode == 255 or line is None and res.returncode != 0 and "ssh:" in res.stderr:
        err = res.stderr.strip().splitlines()
        what = err[-1] if err else f"ssh exited with {res.returncode}"
        port = next((ssh_args[i + 1] for i, a in enumerate(ssh_args) if a == "-p"), None)
        ident = next((ssh_args[i + 1] for i, a in enumerate(ssh_args) if a == "-i"), None)
        rep.errors.append((f"ssh failed: {what}", _fix_for(host, res.stderr, port, ident)))
    elif res.returncode == 127:
        rep.errors.append(
            (
                "python3 not found on the PATH of ssh sessions",
                f"install Python 3 on {host} or put it on the PATH sshd gives sessions",
            )
        )
    elif line is None:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        rep.errors.append(
            (
                f"the probe failed (exit {res.returncode}): {tail}",
                f"run `ssh {host} python3 -V` by hand",
            )
        )
    else:
        rep.probe = json.loads(line.split(" ", 1)[1])
    return rep


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit in ("B", "KiB", "MiB") else f"{n:.1f} {unit}"
        n /= 1024


def compare(reports, launcher):
    """Versions equal to the launcher's; /dev/shm large enough for a host's ranks."""
    for rep in reports:
        if rep.probe is None:
            continue
        if rep.probe.get("horovod") is None:
            rep.errors.append(
                (
                    "horovod is not installed for python3",
                    f"install horovod {launcher.get('horovod')} on {rep.host} "
                    "(or run the same image everywhere)",
                )
            )
        diffs = [
            f"{label} {rep.probe.get(key)} (launcher {launcher.get(key)})"
            for key, label in VERSION_KEYS
            if rep.probe.get(key) != launcher.get(key)
            and not (key == "horovod" and rep.probe.get(key) is None)
        ]
        if diffs:
            rep.errors.append(
                (
                    "versions differ from the launcher's: " + ", ".join(diffs),
                    "install the same versions on every host (run one image everywhere)",
                )
            )
        shm = rep.probe.get("shm_bytes")
        if rep.slots > 1 and shm is not None and shm < probe.SMALL_SHM:
            rep.warnings.append(
                (
                    f"/dev/shm is only {_human(shm)} for {rep.slots} ranks",
                    "give the container more (docker run --shm-size=1g, compose "
                    "shm_size) or Open MPI's shared memory may fail",
                )
            )


def summary_line(rep):
    p = rep.probe
    mark = "ok  " if rep.ok else "FAIL"
    if p is None:
        return f"  {mark}  {rep.host}"
    parts = [f"ssh {rep.seconds:.2f} s" if rep.seconds is not None else "local"]
    parts += [f"{label} {p.get(key)}" for key, label in VERSION_KEYS]
    if p.get("shm_bytes") is not None:
        parts.append(f"/dev/shm {_human(p['shm_bytes'])}")
    if rep.interface:
        name, iface = rep.interface
        parts.append(f"{name} {iface}")
    return f"  {mark}  {rep.host}  " + "  ".join(parts)


def report_text(reports, choice=None, network_error=None, bound=None):
    lines = []
    for rep in reports:
        lines.append(summary_line(rep))
        for what, fix in rep.errors:
            lines.append(f"        {rep.host}: {what}\n          fix: {fix}")
        for what, fix in rep.warnings:
            lines.append(f"        warning: {rep.host}: {what}\n          fix: {fix}")
    if network_error:
        lines.append(f"  network: {network_error}")
    elif choice is not None:
        lines.append(
            f"  network: {choice.mpi_value()} ({choice.reason}; interface "
            f"{'/'.join(choice.names())})"
            + (
                ""
                if choice.launcher_iface is not None
                else "; the launcher has no address in it, so mpirun's own channel uses any"
            )
        )
    return "\n".join(lines)


def run(hosts, local, ssh_args, timeout, requested_interface=None):
    """hosts: [(name, slots)]; local: name -> bool.  Returns (reports, choice, text).
    Raises PreflightFailed with the report if any host fails."""
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
        futures = [pool.submit(ask, h, s, ssh_args, timeout, local[h]) for h, s in hosts]
        reports = [f.result() for f in futures]
    launcher = probe.probe()
    compare(reports, launcher)
    choice, net_error = None, None
    if all(r.ok for r in reports):
        resolved = {}
        for r in reports:
            try:
                resolved[r.host] = socket.getaddrinfo(r.host, None, socket.AF_INET)[0][4][0]
            except socket.gaierror:
                resolved[r.host] = None
        try:
            choice = network.choose(
                {r.host: r.probe for r in reports}, resolved, launcher, requested_interface
            )
            for r in reports:
                r.interface = choice.per_host[r.host]
        except network.NetworkError as e:
            net_error = str(e)
    failed = [r.host for r in reports if not r.ok]
    head = (
        f"horovodrun: preflight of {len(hosts)} host(s) in {time.monotonic() - start:.1f} s "
        f"(bound {timeout:.0f} s)"
    )
    text = head + "\n" + report_text(reports, choice, net_error)
    if failed or net_error:
        why = (
            f"{len(failed)} of {len(hosts)} host(s) failed: {', '.join(failed)}"
            if failed
            else "no usable network"
        )
        raise PreflightFailed(f"{text}\nhorovodrun: preflight failed ({why}); nothing was launched")
    return reports, choice, text


def run_for_flags(args, hosts):
    """run() with horovodrun's flags (-p, -i, --start-timeout, --network-interface), as both
    launchers (mpirun's and --gloo's) ask: (reports, choice, text, ssh_args). The same ssh
    arguments then start the job. Raises PreflightFailed as run() does."""
    ssh_args = ssh_base(args.ssh_port, args.ssh_identity_file, min(10.0, args.start_timeout))
    local = {h: hostlib.is_local(h) for h, _ in hosts}
    reports, choice, text = run(hosts, local, ssh_args, args.start_timeout, args.nics)
    return reports, choice, text, ssh_args
