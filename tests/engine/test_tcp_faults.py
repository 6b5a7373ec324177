"""Faults of a TCP-transport job (test_faults.py is MPI's): what goes wrong while the ranks meet
(no server, a world size or a rank claimed twice, a rank that never comes, a port taken, a
wrong HOROVOD_SECRET_KEY) and while they run (a peer killed, stray connections, and the
watchdog's roll call over UDP: a stopped peer named silent, a busy peer not reported). Each runs
plain processes (tests/support/tcp.py, the ranks' side in tcp_fault_jobs.py) with short rendezvous
timeouts; each asserts the message of every rank that is still alive, a time bound, and that
no process of the job is left (every rank runs in a session of its own: none may outlive it).
"""

import os
import re
import socket
import time

import pytest

from tests.support import procs, tcp
from tests.support.paths import ROOT

JOBS = ROOT / "tests" / "engine" / "tcp_fault_jobs.py"
INIT_FAILED = 3  # tcp_fault_jobs.py's exit status when init raised


class Outcome:
    def __init__(self, job, seconds):
        self.rcs, self.seconds = list(job.returncodes), seconds
        self.outs, self.errs = zip(*job.outputs()) if job.procs else ((), ())
        self.report = f"{seconds:.1f} s, exit codes {self.rcs}\n" + "\n".join(
            f"--- process {i}: stdout\n{o}--- stderr\n{e}"
            for i, (o, e) in enumerate(zip(self.outs, self.errs))
        )

    def init_error(self, i):
        """The message of process i's failed init."""
        m = re.search(r"^INIT ERROR (\w+): (.*)$", self.outs[i], re.M)
        assert m and self.rcs[i] == INIT_FAILED, f"process {i} did not fail init\n{self.report}"
        return m.group(2)


def finish(job, timeout, grace=10):
    """Waits for `job` (start()'s) within `timeout` s; asserts it did not hang and left no
    process behind; returns its Outcome."""
    start = time.monotonic()
    try:
        hung = job.wait(timeout, grace)
    finally:
        if any(rc is None for rc in job.returncodes):
            job.kill()
    left = job.leftovers()
    outcome = Outcome(job, time.monotonic() - start)
    assert not hung, f"the job hung for {timeout} s\n{outcome.report}"
    assert not left, f"processes left: {left}\n{outcome.report}"
    return outcome


def run(envs, *argv, timeout=30):
    return finish(tcp.start(envs, [JOBS, *argv]), timeout)


def torchrun(rank, size, port, **extra):
    return {**tcp.torchrun_env(rank, size, port), **extra}


def gloo(rank, size, port, **extra):
    """Upstream's Gloo variables for `rank` on one host, the server run by someone else."""
    return {
        "HOROVOD_RANK": str(rank),
        "HOROVOD_SIZE": str(size),
        "HOROVOD_LOCAL_RANK": str(rank),
        "HOROVOD_LOCAL_SIZE": str(size),
        "HOROVOD_CROSS_RANK": "0",
        "HOROVOD_CROSS_SIZE": "1",
        "HOROVOD_HOSTNAME": "localhost",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_RENDEZVOUS_SERVER": "external",
        "HOROVOD_TRANSPORT": "tcp",
        **extra,
    }


def test_rendezvous_unreachable():
    """(a) Rank 1 alone: nothing serves MASTER_PORT + 1; init gives up at the timeout."""
    port = tcp.free_port(pair=True)
    o = run([torchrun(1, 2, port, HOROVOD_RENDEZVOUS_TIMEOUT="3")], "init")
    msg = o.init_error(0)
    assert f"cannot reach the rendezvous server at 127.0.0.1:{port + 1} within 3 s" in msg, msg
    assert 2.5 < o.seconds < 10, o.report


def test_world_sizes_disagree():
    """(b) Rank 1 says WORLD_SIZE=3: both fail at once, naming both sizes. The server names
    rank 0 for its size when rank 0 registered first, else its own (rank 0's) expectation: on
    a loaded machine rank 1 can come first."""
    port = tcp.free_port(pair=True)
    envs = [torchrun(0, 2, port), torchrun(1, 3, port)]
    o = run(envs, "init", timeout=20)
    named = (
        r"ranks disagree on the world size: (rank 0 says|the rendezvous server expects) 2, "
        r"rank 1 says 3"
    )
    for i in (0, 1):
        assert re.search(named, o.init_error(i)), o.init_error(i)
    assert o.seconds < 10, o.report


def test_rank_claimed_twice():
    """(c) The server is the launcher's (HOROVOD_RENDEZVOUS_SERVER=external, upstream Gloo's
    variables), so no rank hosts it; two processes claim rank 1: every process is told."""
    from horovod.runner.rendezvous import RendezvousServer

    server = RendezvousServer()
    port = server.start("127.0.0.1", 3, "", 10.0)
    try:
        envs = [gloo(r, 3, port, HOROVOD_RENDEZVOUS_TIMEOUT="10") for r in (0, 1, 1)]
        o = run(envs, "init", timeout=30)
    finally:
        server.stop()
    for i in range(3):
        msg = o.init_error(i)
        assert re.search(r"rank 1 was claimed by two processes \(hosts localhost \(", msg), msg
    assert o.seconds < 10, o.report


def test_rank_that_never_arrives():
    """(d) WORLD_SIZE=3, ranks 0 and 1 only: at the timeout both name rank 2 and the count."""
    port = tcp.free_port(pair=True)
    o = run([torchrun(r, 3, port, HOROVOD_RENDEZVOUS_TIMEOUT="3") for r in (0, 1)], "init")
    for i in (0, 1):
        msg = o.init_error(i)
        assert "timed out after 3 s with 2 of 3 ranks registered; missing: rank 2" in msg, msg
    assert 2.5 < o.seconds < 10, o.report


def test_rendezvous_port_taken():
    """(e) Something else listens at MASTER_PORT + 1: rank 0 cannot serve there and says
    where; rank 1, connected to that other listener, is never greeted and gives up, bounded."""
    port = tcp.free_port(pair=True)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", port + 1))
        taken.listen()
        o = run([torchrun(r, 2, port, HOROVOD_RENDEZVOUS_TIMEOUT="2") for r in (0, 1)], "init")
    msg = o.init_error(0)
    assert f"the rendezvous server cannot listen on 0.0.0.0:{port + 1}" in msg, msg
    assert "Address already in use" in msg, msg
    msg = o.init_error(1)
    assert f"the rendezvous server at 127.0.0.1:{port + 1} did not greet" in msg, msg
    assert o.seconds < 10, o.report


@pytest.mark.parametrize("size", [2, 3])
def test_peer_killed_mid_collective(size):
    """(f) Rank 1 SIGKILLs itself after the first allreduce while the others loop allreducing:
    every other rank's op fails with HorovodInternalError naming rank 1, within seconds, and
    the rank ends cleanly (exit 0, its shutdown at exit)."""
    port = tcp.free_port(pair=True)
    o = run([torchrun(r, size, port) for r in range(size)], "killed", timeout=30)
    assert o.rcs[1] == -9, o.report
    for r in (0, 2)[: size - 1]:
        assert o.rcs[r] == 0, o.report
        m = re.search(rf"^ERROR rank={r} after ([\d.]+) s (\w+): (.*)$", o.outs[r], re.M)
        assert m, f"rank {r} reported no error\n{o.report}"
        seconds, kind, msg = float(m.group(1)), m.group(2), m.group(3)
        assert kind == "HorovodInternalError" and "rank 1" in msg, o.report
        assert seconds < 5, o.report
    assert o.seconds < 15, o.report


def blocked_reports(err):
    return [ln for ln in err.splitlines() if "has been blocked for" in ln]


@pytest.mark.parametrize("where", ["ring", "idle"])
def test_stopped_rank_is_named_silent_by_the_roll_call(where):
    """(g) Rank 1 of 3 stops (SIGSTOP) inside a ring allreduce ("ring") or between ops, the
    others then blocked in a negotiation round ("idle"); rank 0 wakes it 4 s later. Meanwhile
    the watchdog of ranks 0 and 2 reports the blocked section naming rank 1 as silent and the
    other as blocked too: the roll call over UDP. Without it (the UDP channel off) rank 0 named
    "rank 2 (receiving from it) or rank 1 (sending to it)" in the ring, and "every rank" in a
    negotiation round. The job then ends well."""
    port = tcp.free_port(pair=True)
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1"}
    o = run([torchrun(r, 3, port, **env) for r in range(3)], "stopped", "4", where, timeout=90)
    assert o.rcs == [0, 0, 0] and "SEEN STOPPED" in o.outs[0], o.report
    for r in range(3):
        assert f"DONE rank={r}" in o.outs[r], o.report
    assert not blocked_reports(o.errs[1]), o.report  # its own stop is no one's stall
    section = "RING_ALLREDUCE of tensor 'stopped/big'" if where == "ring" else "negotiation round"
    for r, other in ((0, 2), (2, 0)):
        lines = [ln for ln in blocked_reports(o.errs[r]) if section in ln]
        assert lines, f"rank {r} reported nothing\n{o.report}"
        for ln in lines:
            assert "waiting for rank 1 (silent" in ln, o.report
        assert any(f"rank {other} is blocked in it too" in ln for ln in lines), o.report


def test_peer_busy_with_local_work_is_not_a_stall(tmp_path):
    """(h) Rank 0 allgathers 1 GiB, ranks 1 and 2 one row each, with a stall shutdown at 1.5 s.
    The receivers copy rank 0's segment out of its memory (single copy), so rank 0 waits for
    seconds while they work: without the roll call its watchdog aborted the job ("blocked ...
    waiting for rank 2 (receiving from it) or rank 1 (sending to it)"; 3 runs of 3 at 400 MiB and
    a 0.6 s shutdown). Now the busy ranks answer its roll call ("working in this section") over
    UDP and the job ends well. The bounds leave the answers (a 100 ms tick each way) a second of
    slack on a loaded 2-core machine."""
    port = tcp.free_port(pair=True)
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "0.5", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "1.5"}
    ready = str(tmp_path / "x-filled")
    o = run([torchrun(r, 3, port, **env) for r in range(3)], "busy", "1024", ready, timeout=120)
    assert o.rcs == [0, 0, 0], o.report
    for r in range(3):
        assert f"OK busy rank={r}" in o.outs[r], o.report
        assert "Aborting the job" not in o.errs[r], o.report
    elapsed = [float(t) for t in re.findall(r"OK busy rank=\d+ ([\d.]+)", "".join(o.outs))]
    print(f"allgather of 1 GiB took {elapsed} s; watchdog shutdown at 1.5 s")


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def listening_ports(pid):
    """The TCP ports process `pid` listens on (IPv4: /proc/net/tcp, state 0A, its sockets)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if m:
            inodes.add(m.group(1))
    with open(f"/proc/{pid}/net/tcp") as f:
        rows = [line.split() for line in f.read().splitlines()[1:]]
    return {int(r[1].split(":")[1], 16) for r in rows if r[3] == "0A" and r[9] in inodes}


def stray(port, payload):
    """A connection to 127.0.0.1:port that sends `payload` (None: nothing) and stays open;
    None if nothing accepts there."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError:
        return None
    if payload:
        try:
            s.sendall(payload)
        except OSError:
            pass
    return s


GARBAGE = [
    b"",  # connects and closes
    b"GET / HTTP/1.0\r\n\r\n",
    b"\x10\x00\x00\x00HVDR\x01\x00\x00\x00\xff\xff",  # a frame with the magic, cut short
    b"\xff\xff\xff\x7f" + b"x" * 64,  # a frame length of 2 GiB
    None,  # connects and says nothing, kept open
]


def test_stray_connections_do_not_disturb_the_job():
    """(g) Rank 0 waits for rank 1 (with HOROVOD_SECRET_KEY on both: the proofs pass):
    connections to its rendezvous and to its data listener that close, send garbage or say
    nothing do not stop the job from forming; once it runs, its allreduces complete whatever
    connects to the port."""
    port = tcp.free_port(pair=True)
    env = {"HOROVOD_SECRET_KEY": "s3cret", "HOROVOD_RENDEZVOUS_TIMEOUT": "20"}
    first = tcp.start([torchrun(0, 2, port, **env)], [JOBS, "steady", "2"])
    held, second = [], None
    try:
        deadline = time.monotonic() + 15
        while not listening(port + 1):
            assert time.monotonic() < deadline, "rank 0's rendezvous never listened"
            time.sleep(0.05)
        # The rendezvous, and rank 0's data listener (the mesh: peers connect there next).
        ports = listening_ports(first.procs[0].pid)
        assert port + 1 in ports and len(ports) >= 2, ports
        for target in sorted(ports):
            for payload in GARBAGE:
                s = stray(target, payload)
                assert s is not None, f"port {target} stopped accepting"
                if payload == b"":
                    s.close()
                else:
                    held.append(s)
        second = tcp.start([torchrun(1, 2, port, **env)], [JOBS, "steady", "2"])
        deadline = time.monotonic() + 20
        while "FORMED" not in first.peek(0):
            assert first.procs[0].poll() is None, "rank 0 ended before the job formed"
            assert time.monotonic() < deadline, "the job did not form"
            time.sleep(0.05)
        for payload in GARBAGE:  # while it runs (the port is closed once the job formed)
            s = stray(port + 1, payload)
            if s is not None:
                held.append(s)
    finally:
        job = tcp.Job(
            first.procs + (second.procs if second else []),
            first.files + (second.files if second else []),
            "stray",
        )
        o = finish(job, 30)
        for s in held:
            s.close()
    assert o.rcs == [0, 0], o.report
    for r in (0, 1):
        assert re.search(rf"^DONE rank={r} steps=\d+$", o.outs[r], re.M), o.report
    assert "rendezvous: refused the connection from 127.0.0.1:" in o.errs[0], o.report
    assert "rank 0 refused a connection from 127.0.0.1:" in o.errs[0], o.report


def test_secret_key_mismatch():
    """(h) Rank 1's HOROVOD_SECRET_KEY differs from rank 0's (whose server checks the proofs):
    rank 1 is refused at once, rank 0 names it at its timeout."""
    port = tcp.free_port(pair=True)
    envs = [
        torchrun(0, 2, port, HOROVOD_SECRET_KEY="one", HOROVOD_RENDEZVOUS_TIMEOUT="3"),
        torchrun(1, 2, port, HOROVOD_SECRET_KEY="two", HOROVOD_RENDEZVOUS_TIMEOUT="3"),
    ]
    o = run(envs, "init")
    msg = o.init_error(1)
    assert "the HOROVOD_SECRET_KEY of this process (rank 1) differs from the rendezvous" in msg
    msg = o.init_error(0)
    assert "missing: rank 1" in msg and "claiming rank 1 failed authentication" in msg, msg
    assert "HOROVOD_SECRET_KEY differs" in msg, msg
    assert o.seconds < 10, o.report


# -- the launcher's own bounds (tests/support/tcp.py) ---------------------------------------------

SLEEPER = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[1]])\n"
    "if os.environ['RANK'] == '1' and len(sys.argv) > 2: sys.exit(5)\n"
    "time.sleep(60)\n"
)


def test_launch_timeout_kills_every_rank_and_what_it_started():
    """A hang fails the test at the timeout, and no rank, nor a child of one, is left."""
    marker = procs.new_marker("tcp-timeout")
    try:
        with pytest.raises(pytest.fail.Exception, match="hung for more than 2 s"):
            tcp.launch_tcp(2, "-c", SLEEPER, marker, timeout=2)
        assert not procs.wait_gone(marker, 5), "processes of the job left"
    finally:
        procs.kill_all(marker)


def test_launch_ends_the_others_after_a_rank_fails():
    """As mpirun: once rank 1 exits 5, the others get `grace` seconds, then the launch returns
    rank 1's status with nothing left running."""
    marker = procs.new_marker("tcp-grace")
    start = time.monotonic()
    try:
        rc, _, err = tcp.launch_tcp(2, "-c", SLEEPER, marker, "fail", timeout=30, grace=1)
        assert rc == 5 and time.monotonic() - start < 10, err
        assert not procs.wait_gone(marker, 5), "processes of the job left"
    finally:
        procs.kill_all(marker)
