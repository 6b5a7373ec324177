"""horovodrun --gloo (horovod/runner/gloo_launch.py): placement, each rank's variables and start
command (pure); the supervision with plain Python ranks and a stand-in rendezvous server (no
engine): output prefixes, a failing rank's code, signals, no process left, the ssh path through
a stand-in `ssh` that runs the remote command here; then real horovod.numpy ranks over the
engine's TCP transport when it is built."""

import ipaddress
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from horovod.runner import gloo_launch, launch, preflight
from tests.support import mpi, procs
from tests.support.paths import ROOT

JOB = str(ROOT / "tests" / "runner" / "jobs" / "gloo_allreduce.py")


def args_for(argv):
    return launch.parse_args(["--gloo", *argv])


# -- pure ------------------------------------------------------------------------------------


def test_placement_fills_slots_in_order_with_local_and_cross_ranks():
    slots = gloo_launch.placement([("a", 2), ("b", 1), ("c", 2)], 5)
    got = [(s.rank, s.host, s.local_rank, s.local_size, s.cross_rank, s.cross_size) for s in slots]
    assert got == [
        (0, "a", 0, 2, 0, 3),
        (1, "a", 1, 2, 0, 2),
        (2, "b", 0, 1, 1, 3),
        (3, "c", 0, 2, 2, 3),
        (4, "c", 1, 2, 1, 2),
    ]
    # Fewer ranks than slots: the last host gets only what is left.
    short = gloo_launch.placement([("a", 2), ("b", 2)], 3)
    assert [(s.host, s.local_size, s.cross_size) for s in short] == [
        ("a", 2, 2),
        ("a", 2, 1),
        ("b", 1, 2),
    ]
    assert {r: s.host for r, s in enumerate(short)} == launch.rank_hosts([("a", 2), ("b", 2)], 3)


def test_rank_env_has_upstreams_variables():
    slot = gloo_launch.Slot(3, "w1", 1, 2, 1, 2)
    env = gloo_launch.rank_env(slot, 4, ("10.0.0.1", 4242), "eth1")
    want = "3 4 1 2 1 2 w1 10.0.0.1 4242 external tcp eth1".split()
    names = "RANK SIZE LOCAL_RANK LOCAL_SIZE CROSS_RANK CROSS_SIZE HOSTNAME GLOO_RENDEZVOUS_ADDR "
    names += "GLOO_RENDEZVOUS_PORT RENDEZVOUS_SERVER TRANSPORT GLOO_IFACE"
    assert env == {f"HOROVOD_{n}": v for n, v in zip(names.split(), want)}
    assert "HOROVOD_GLOO_IFACE" not in gloo_launch.rank_env(slot, 4, ("a", 1))


def test_local_rank_gets_the_secret_in_its_environment_only():
    args = args_for(["-np", "2", "python", "train.py"])
    slot = gloo_launch.placement([("localhost", 2)], 2)[1]
    start = gloo_launch.rank_launch(
        args, {"PATH": "/bin", "HOME": "/h"}, slot, 2, ("127.0.0.1", 5), None, "s3cr3t", []
    )
    assert not start.remote and start.argv == ["python", "train.py"]
    assert start.env["HOROVOD_SECRET_KEY"] == "s3cr3t" and start.env["HOME"] == "/h"
    assert start.env["HOROVOD_RANK"] == "1" and start.env["HOROVOD_LOCAL_RANK"] == "1"
    assert "s3cr3t" not in start.shown and "HOROVOD_RANK=1" in start.shown


def test_remote_rank_command_carries_no_secret():
    args = args_for(["-np", "2", "python", "train.py", "--lr", "0.1 x"])
    env = {
        "PATH": "/opt/bin:/bin",
        "HOME": "/h",
        "MY_PASSWORD": "pw",
        "NCCL_DEBUG": "INFO",
        "HOROVOD_ELASTIC_TOKEN": "tok",
        "HOROVOD_SECRET_KEY": "stale",
    }
    slot = gloo_launch.placement([("w1", 2)], 2)[0]
    ssh_args = preflight.ssh_base(2222, "/k", 5)
    start = gloo_launch.rank_launch(
        args, env, slot, 2, ("10.0.0.1", 5), "eth0", "s3cr3t", ssh_args, cwd="/my dir"
    )
    assert start.remote and start.argv[0] == "ssh" and start.argv[-2] == "w1"
    assert start.argv[1 : 1 + len(ssh_args)] == ssh_args
    assert not any("s3cr3t" in a or "tok" in a or "stale" in a for a in start.argv)
    assert "HOROVOD_SECRET_KEY" not in start.env and "HOROVOD_ELASTIC_TOKEN" not in start.env
    assert json.loads(start.stdin) == {
        "HOROVOD_SECRET_KEY": "s3cr3t",
        "HOROVOD_ELASTIC_TOKEN": "tok",
    }
    words = shlex.split(start.argv[-1])
    assert words[:3] == ["cd", "/my dir", "2>/dev/null;"]
    assert words[3:5] == ["exec", "env"]
    assigns = dict(w.split("=", 1) for w in words[5 : words.index("python3")])
    assert assigns["PATH"] == "/opt/bin:/bin" and assigns["NCCL_DEBUG"] == "INFO"
    assert assigns["HOROVOD_RANK"] == "0" and assigns["HOROVOD_GLOO_IFACE"] == "eth0"
    assert "HOME" not in assigns and "MY_PASSWORD" not in assigns
    assert words[-4:] == ["python", "train.py", "--lr", "0.1 x"]


def test_rendezvous_address():
    assert gloo_launch.rendezvous_address([("localhost", 2)]) == ("127.0.0.1", "127.0.0.1")
    choice = types.SimpleNamespace(launcher_iface=ipaddress.ip_interface("10.1.2.3/24"))
    assert gloo_launch.rendezvous_address([("w1", 1)], choice) == ("10.1.2.3", "10.1.2.3")
    bind, told = gloo_launch.rendezvous_address([("127.0.0.2", 1)], None)
    assert bind == "" and told == "127.0.0.1"  # the address facing that host


def test_network_interface_on_this_host_alone():
    assert gloo_launch.interfaces([("localhost", 2)], None, "lo") == {"localhost": "lo"}
    assert gloo_launch.interfaces([("localhost", 2)], None, "127.0.0.0/8") == {"localhost": "lo"}
    assert gloo_launch.interfaces([("localhost", 2)], None, None) == {}
    from horovod.runner import network

    with pytest.raises(network.NetworkError):
        gloo_launch.interfaces([("localhost", 2)], None, "nosuch0")


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--mpi-args", "--mca btl tcp,self"], "--mpi-args"),
        (["--mpirun", "/opt/mpirun"], "--mpirun"),
        (["--mpi"], "--mpi"),
        (["--check-network"], "--check-network"),
    ],
)
@pytest.mark.parametrize("alias", ["--gloo", "--tcp"])
def test_mpirun_flags_with_gloo_are_usage_errors(alias, extra, flag, capsys):
    command = [] if flag == "--check-network" else ["python", "t.py"]
    with pytest.raises(SystemExit) as e:
        launch.parse_args([alias, "-np", "2", *extra, *command])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} is for the mpirun launch" in err and "--gloo" in err


def test_flags():
    assert launch.parse_args(["--tcp", "python", "t.py"]).gloo
    args = launch.parse_args(["-np", "2", "python", "t.py"])
    assert not args.gloo and args.mpirun == "mpirun"


def test_exit_descriptions():
    slot = gloo_launch.Slot(2, "w1", 0, 1, 0, 1)
    assert gloo_launch.describe_exit(slot, 3, False) == "rank 2 on w1 exited with code 3"
    assert "killed by signal SIGKILL" in gloo_launch.describe_exit(slot, -9, False)
    assert "killed by signal SIGTERM" in gloo_launch.describe_exit(slot, 143, True)
    assert "ssh failed" in gloo_launch.describe_exit(slot, 255, True)
    assert gloo_launch.exit_signal(143, False) is None


# -- the remote wrapper, run here by sh ----------------------------------------------------------


def _remote(program, variables, marker):
    cmd = gloo_launch.remote_command([sys.executable, "-c", program, marker], variables, "/")
    return subprocess.Popen(
        ["sh", "-c", cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_remote_wrapper_passes_secret_variables_and_exit_code():
    marker = procs.new_marker("wrapper")
    program = (
        "import os, sys; print(os.getcwd(), os.environ['HOROVOD_SECRET_KEY'], "
        "os.environ['HOROVOD_RANK']); sys.exit(5)"
    )
    p = _remote(program, {"HOROVOD_RANK": "7", "PATH": os.environ["PATH"]}, marker)
    try:  # stdin stays open: closing it would stop the rank
        p.stdin.write('{"HOROVOD_SECRET_KEY": "k3y"}\n')
        p.stdin.flush()
        out = p.stdout.read()
        assert p.wait(30) == 5 and out.split() == ["/", "k3y", "7"]
    finally:
        procs.kill_all(marker)
        p.kill()
        p.wait()


def test_remote_wrapper_stops_the_rank_when_stdin_closes():
    """What happens on a remote host when horovodrun closes ssh's stdin (or the connection
    drops): the rank and its children get SIGTERM; one that ignores it, SIGKILL after the
    grace."""
    marker = procs.new_marker("wrapper")
    program = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"subprocess.Popen(['sleep', '600', '{marker}']); print('UP', flush=True); time.sleep(600)"
    )
    p = _remote(program, {"PATH": os.environ["PATH"]}, marker)
    try:
        p.stdin.write("{}\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "UP"
        assert len(procs.with_marker(marker)) >= 2
        start = time.monotonic()
        p.stdin.close()
        assert p.wait(gloo_launch.GRACE_SECONDS + 10) == 128 + signal.SIGKILL
        assert time.monotonic() - start >= gloo_launch.GRACE_SECONDS - 0.5
        assert not procs.wait_gone(marker, 5)
    finally:
        procs.kill_all(marker)
        p.kill()
        p.wait()


# -- supervision with plain Python ranks and a stand-in rendezvous (no engine) --------------------


class FakeServer:
    started = []

    def start(self, addr, size, secret, timeout_s):
        FakeServer.started.append((addr, size, len(secret), timeout_s))
        self.running = True
        return 4321

    def stop(self):
        self.running = False


@pytest.fixture
def fake_rendezvous(monkeypatch):
    FakeServer.started = []
    module = types.ModuleType("horovod.runner.rendezvous")
    module.RendezvousServer = FakeServer
    monkeypatch.setitem(sys.modules, "horovod.runner.rendezvous", module)
    return FakeServer


# A rank that prints its variables and checks that no process's command line holds its secret.
SHOW_RANK = """
import os, sys
key = os.environ["HOROVOD_SECRET_KEY"]
token = os.environ.get("HOROVOD_ELASTIC_TOKEN", "")
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        seen.append(open(f"/proc/{pid}/cmdline", "rb").read())
    except OSError:
        pass
leak = any(key.encode() in c or (token and token.encode() in c) for c in seen)
names = ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE", "HOSTNAME",
         "GLOO_RENDEZVOUS_ADDR", "GLOO_RENDEZVOUS_PORT", "RENDEZVOUS_SERVER", "TRANSPORT")
print("ENV", *(os.environ["HOROVOD_" + n] for n in names), len(key), len(token),
      "leak" if leak else "ok")
print("to stderr", file=sys.stderr)
print("no newline at the end", end="")
"""


def run_here(argv, env=None):
    """launch.main(argv) in this process, its environment `env` added; returns its rc."""
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        return launch.main(argv)
    finally:
        os.environ.clear()
        os.environ.update(old)


@pytest.mark.parametrize("hosts", [None, "localhost:3"])
def test_local_ranks_output_and_variables(hosts, fake_rendezvous, capfd):
    flags = ["-H", hosts] if hosts else ["-np", "3"]
    assert run_here(["--gloo", *flags, sys.executable, "-c", SHOW_RANK]) == 0
    out, err = capfd.readouterr()
    ranks = {}
    for line in out.splitlines():
        m = re.fullmatch(r"\[(\d)\]<stdout>:ENV (.*)", line)
        if m:
            ranks[int(m.group(1))] = m.group(2).split()
    host = "localhost"
    assert ranks == {
        r: [str(r), "3", str(r), "3", "0", "1", host, "127.0.0.1", "4321", "external", "tcp"]
        + ["64", "0", "ok"]
        for r in range(3)
    }
    for r in range(3):
        assert f"[{r}]<stdout>:no newline at the end" in out
        assert f"[{r}]<stderr>:to stderr" in err
    assert fake_rendezvous.started[0][:3] == ("127.0.0.1", 3, 64)


FAIL_RANK = """
import os, sys, time
rank = int(os.environ["HOROVOD_RANK"])
print("UP", flush=True)
if rank == 1:
    time.sleep(0.5)
    sys.exit(3)
time.sleep(600)
"""


def test_failing_rank_stops_the_others(fake_rendezvous, capfd):
    marker = procs.new_marker("gloo-fail")
    try:
        start = time.monotonic()
        rc = run_here(["--gloo", "-np", "3", sys.executable, "-c", FAIL_RANK, marker])
        assert rc == 3
        assert time.monotonic() - start < 20
        err = capfd.readouterr().err
        assert "rank 1 on localhost exited with code 3" in err
        assert not procs.wait_gone(marker, 5)
    finally:
        procs.kill_all(marker)


@pytest.fixture
def stand_in_ssh(monkeypatch, tmp_path):
    """A stand-in `ssh` that drops its options and host and runs the command with sh, as sshd
    would (in a clean environment but PATH), and a stand-in preflight (the real one needs
    horovod installed, not on PYTHONPATH) choosing `lo`: the remote path whole, on this
    machine, for host 127.0.0.2. Returns the environment horovodrun needs for it."""
    fake_ssh = tmp_path / "bin" / "ssh"
    fake_ssh.parent.mkdir()
    fake_ssh.write_text(
        "#!/bin/sh\n"
        'while [ $# -gt 0 ]; do\n  case "$1" in -o|-p|-i) shift 2;; -*) shift;; *) break;; esac\n'
        "done\n"
        # No exec: this shell stands for the ssh client, its child for the remote side.
        'shift\nenv -i HOME="$HOME" PATH="$PATH" sh -c "$*"\n'
    )
    fake_ssh.chmod(0o755)
    choice = types.SimpleNamespace(
        per_host={"127.0.0.2": ("lo", None)},
        launcher_iface=ipaddress.ip_interface("127.0.0.1/8"),
    )
    monkeypatch.setattr(preflight, "run", lambda *a, **k: ([], choice, "preflight stand-in"))
    path = f"{fake_ssh.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
    return {"PATH": path + os.environ["PATH"]}


def test_ssh_path_through_a_stand_in_ssh(fake_rendezvous, stand_in_ssh, capfd):
    env = {**stand_in_ssh, "HOROVOD_ELASTIC_TOKEN": "tok-123"}
    rc = run_here(["--gloo", "-H", "127.0.0.2:2", sys.executable, "-c", SHOW_RANK], env)
    out, err = capfd.readouterr()
    assert rc == 0, err
    for r in range(2):
        assert (
            f"[{r}]<stdout>:ENV {r} 2 {r} 2 0 1 127.0.0.2 127.0.0.1 4321 external tcp 64 7 ok"
            in (out)
        )
        assert f"[{r}]<stderr>:to stderr" in err

    marker = procs.new_marker("gloo-ssh-fail")
    try:
        rc = run_here(["--gloo", "-H", "127.0.0.2:3", sys.executable, "-c", FAIL_RANK, marker], env)
        assert rc == 3
        assert "rank 1 on 127.0.0.2 exited with code 3" in capfd.readouterr().err
        assert not procs.wait_gone(marker, 5)  # the wrappers stopped the others
    finally:
        procs.kill_all(marker)


# horovodrun in a process of its own, with the stand-in rendezvous and preflight (the one of
# stand_in_ssh; only a remote host asks it).
DRIVER = """
import ipaddress, sys, types
m = types.ModuleType("horovod.runner.rendezvous")
class S:
    def start(self, *a): return 4321
    def stop(self): pass
m.RendezvousServer = S
sys.modules[m.__name__] = m
from horovod.runner import launch, preflight
c = types.SimpleNamespace(per_host={"127.0.0.2": ("lo", None)},
                          launcher_iface=ipaddress.ip_interface("127.0.0.1/8"))
preflight.run = lambda *a, **k: ([], c, "preflight stand-in")
sys.exit(launch.main())
"""
SLEEPER = "import time; print('RANK UP', flush=True); time.sleep(600)"


@pytest.mark.parametrize("remote", [False, True], ids=["local", "ssh"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=str)
def test_signal_to_horovodrun_ends_every_rank(sig, remote, stand_in_ssh, tmp_path):
    """Remote ranks end too: their wrapper sees ssh's stdin close (horovodrun killed: the
    stand-in ssh gets SIGKILL with it, and the pipe's writer is gone)."""
    marker = procs.new_marker("gloo-signal")
    log = tmp_path / "log"
    where = ["-H", "127.0.0.2:2"] if remote else ["-np", "2"]
    cmd = [sys.executable, "-c", DRIVER, "--gloo", *where, sys.executable, "-c", SLEEPER]
    with open(log, "wb") as out:
        hr = subprocess.Popen(
            cmd + [marker],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=mpi.environment(stand_in_ssh),
            start_new_session=True,
        )
    try:
        procs.wait_for(lambda: log.read_text().count("RANK UP") == 2, 60, "both ranks starting")
        hr.send_signal(sig)
        left = procs.wait_gone(marker, gloo_launch.GRACE_SECONDS + 10)
        assert not left, f"{left}\n{log.read_text()}"
        rc = hr.wait(10)
        if sig != signal.SIGKILL:
            assert rc == 128 + sig, log.read_text()
            assert f"{signal.Signals(sig).name}: stopping 2 rank(s)" in log.read_text()
    finally:
        procs.kill_all(marker)
        hr.kill()
        hr.wait()


# -- real ranks over the engine's TCP transport -------------------------------------------------


def _engine_ready():
    """The engine is built with the TCP transport: its rendezvous server is bound."""
    try:
        from horovod.runner import rendezvous

        return hasattr(rendezvous.core(), "start_rendezvous")
    except (ImportError, OSError):
        return False


needs_engine = pytest.mark.skipif(
    not _engine_ready(), reason="the engine with its TCP transport is not built"
)


def horovodrun(*argv, timeout=120):
    """A real `horovodrun --gloo ...` of the job; returns (rc, stdout, stderr)."""
    p = mpi.run(
        [sys.executable, "-m", "horovod.runner.launch", "--gloo", *argv],
        env={"HOROVOD_RENDEZVOUS_TIMEOUT": "60"},
        timeout=timeout,
    )
    return p.returncode, p.stdout, p.stderr


def results(out):
    """{rank: RESULT fields} from the prefixed lines, checking the prefix is the rank's own."""
    found = {}
    for line in out.splitlines():
        m = re.fullmatch(r"\[(\d+)\]<stdout>:RESULT rank=(\d+) (.*)", line)
        if m:
            assert m.group(1) == m.group(2), line
            found[int(m.group(1))] = dict(f.split("=", 1) for f in m.group(3).split(" "))
    return found


@needs_engine
@pytest.mark.parametrize("np_", [2, 3])
def test_real_ranks_allreduce(np_):
    rc, out, err = horovodrun("-np", str(np_), sys.executable, JOB)
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err}"
    want = ",".join(str(sum(r + i for r in range(np_))) for i in range(3))
    got = results(out)
    assert set(got) == set(range(np_)), f"stdout:\n{out}\nstderr:\n{err}"
    for r, fields in got.items():
        assert fields["size"] == str(np_)
        assert fields["local"] == f"{r}/{np_}" and fields["cross"] == "0/1"
        assert fields["sum"] == want
        assert f"[{r}]<stderr>:ERR rank={r}" in err


@needs_engine
def test_real_ranks_with_host_list():
    rc, out, err = horovodrun("-H", "localhost:2", sys.executable, JOB)
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert set(results(out)) == {0, 1}


@needs_engine
def test_real_rank_exit_code_ends_the_job():
    marker = procs.new_marker("gloo-real-fail")
    try:
        start = time.monotonic()
        rc, out, err = horovodrun(
            "-np", "3", sys.executable, JOB, "--fail-rank", "1", "--exit-code", "3", marker
        )
        assert rc == 3, f"stdout:\n{out}\nstderr:\n{err}"
        assert "rank 1 on localhost exited with code 3" in err
        assert set(results(out)) == {0, 1, 2}
        assert time.monotonic() - start < 60
        assert not procs.wait_gone(marker, 5)
    finally:
        procs.kill_all(marker)


@needs_engine
def test_real_ranks_through_the_stand_in_ssh(stand_in_ssh, capfd):
    """The secret reaches remote ranks on the wrapper's stdin: the engine's rendezvous checks
    every rank's HMAC proof of it."""
    env = {**stand_in_ssh, "HOROVOD_RENDEZVOUS_TIMEOUT": "60"}
    rc = run_here(["--gloo", "-H", "127.0.0.2:2", sys.executable, JOB], env)
    out, err = capfd.readouterr()
    assert rc == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert set(results(out)) == {0, 1}


@needs_engine
def test_elastic_over_gloo_goes_on_after_a_rank_is_killed(tmp_path):
    from tests.runner.elastic_job import done_lines, wait_for
    from tests.runner.elastic_job import horovodrun as elastic_horovodrun

    def kill(tmp):
        pid = tmp / "pids" / "g0-r2.pid"
        wait_for(pid)
        (tmp / "hosts").write_text("localhost:2\n")
        os.kill(int(pid.read_text()), signal.SIGKILL)

    rc, out = elastic_horovodrun(tmp_path, "localhost:3\n", "--gloo", "--min-np", "2", during=kill)
    assert rc == 0, out
    assert re.search(r"rank 2 on \S+ killed by signal 9", out), out
    assert "generation 1: 2 rank(s)" in out and "resumed from commit" in out, out
    done = done_lines(out)
    assert len(done) == 2 and all(d[2] == "2" and float(d[4]) == 40.0 for d in done), out
