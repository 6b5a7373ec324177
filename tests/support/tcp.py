"""Launching ranks over the engine's TCP transport, as torchrun would: plain processes with
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (rank 0 serves the
rendezvous at MASTER_PORT + 1) and HOROVOD_TRANSPORT=tcp, no mpirun. tests/support/mpi.py's
Program routes here with transport="tcp"; the TCP fault tests start ranks with envs of their own
through start() (a rank with a wrong WORLD_SIZE, a rank that never comes, ...).

Like mpi.launch: every launch has a hard timeout that kills every rank and fails the test with
the output so far; the ranks' outputs are merged into one stdout and one stderr text (rank 0's,
then rank 1's, ...: the order within a rank is kept). Like mpirun, once one rank has failed the
others get `grace` seconds to end on their own (they should: a lost peer is an error on TCP
too), then are killed. Each rank runs in a session of its own, so that a kill reaches whatever
it started, and Job.leftovers() finds anything of a session still alive.

A scenario program (tests/support/scenario.py) reports its rank from OMPI_COMM_WORLD_RANK, which
no TCP launcher sets: scenario programs run here through this file as a wrapper
(`python tests/support/tcp.py PROGRAM NAMES [ARGS...]`, see main()), which has it report the
rank from RANK instead and then runs PROGRAM as __main__, unchanged.
"""

import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import time

MPI_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "MPI_LOCALNRANKS", "HYDRA_", "SLURM_")
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR")


def free_port(host="127.0.0.1", pair=False):
    """A TCP port nothing listens on (bound to port 0, then released); with `pair`, one whose
    next port is free too (torchrun's MASTER_PORT: the rendezvous takes MASTER_PORT + 1)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
            if not pair:
                return port
            if port >= 65535:
                continue
            with socket.socket() as nxt:
                try:
                    nxt.bind((host, port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free pair of TCP ports found in 100 tries")


def torchrun_env(rank, size, port, addr="127.0.0.1"):
    """torchrun's variables for `rank` of `size` ranks on this one host, MASTER_PORT `port`."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(size),
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        "HOROVOD_TRANSPORT": "tcp",
    }


def rank_environment(env, site):
    """One rank's full environment: mpi.environment()'s (ours, `site` first on PYTHONPATH),
    without any MPI launcher's variables (this test may itself run under one), then `env`."""
    from tests.support.mpi import environment

    base = {}
    for k, v in environment(site=site).items():
        if not k.startswith(MPI_LAUNCHER_PREFIXES):
            base[k] = v
    base.update(env)
    return base


def session_members(sid):
    """pids of the live (non-zombie) processes of session `sid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return found


class Job:
    """Processes started by start(), one per env; wait() collects them."""

    def __init__(self, procs, files, what):
        self.procs, self.files, self.what = procs, files, what
        self.returncodes = [None] * len(procs)
        self.first_failed = None  # index of the first process seen ending non-zero

    def kill(self):
        """SIGKILL to every process's group (and to anything left in the session of one that
        ended already), then reaps them."""
        for p in self.procs:
            targets = session_members(p.pid) if p.returncode is not None else [-p.pid]
            for pid in targets:
                try:
                    os.kill(pid, signal.SIGKILL)  # -pid: the process group
                except (ProcessLookupError, PermissionError):
                    pass
        for i, p in enumerate(self.procs):
            p.wait()
            self.returncodes[i] = p.returncode

    def wait(self, timeout, grace=10.0):
        """Waits for every process to end; once one ended non-zero, the others get `grace`
        seconds more. Kills what is left at either bound; returns True if it had to kill
        because of `timeout` (a hang), False otherwise."""
        start = time.monotonic()
        deadline = start + timeout
        while True:
            for i, p in enumerate(self.procs):
                if self.returncodes[i] is None and p.poll() is not None:
                    self.returncodes[i] = p.returncode
                    if p.returncode != 0 and self.first_failed is None:
                        self.first_failed = i
                        deadline = min(deadline, time.monotonic() + grace)
            if all(rc is not None for rc in self.returncodes):
                return False
            if time.monotonic() > deadline:
                hung = self.first_failed is None or time.monotonic() > start + timeout
                self.kill()
                return hung
            time.sleep(0.02)

    def returncode(self):
        """The first non-zero exit code (in the order they were seen), or 0."""
        if self.first_failed is not None:
            return self.returncodes[self.first_failed]
        return next((rc for rc in self.returncodes if rc), 0)

    def peek(self, i):
        """Process i's stdout so far (while it runs: pread, the file offset is the writer's)."""
        fd = self.files[i][0].fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def outputs(self):
        """[(stdout, stderr)] of each process, as text."""
        got = []
        for out, err in self.files:
            texts = []
            for f in (out, err):
                f.seek(0)
                texts.append(f.read().decode(errors="replace"))
                f.close()
            got.append(tuple(texts))
        self.files = []
        return got

    def leftovers(self):
        """{pid: [live pids of its session]} for each process whose session is not empty."""
        return {p.pid: m for p in self.procs if (m := session_members(p.pid))}


def start(envs, argv, *, site=None, what=None):
    """One process per entry of `envs`, each `python ARGV...` in `site` (default: the source
    tree) with rank_environment(env), in a session of its own, output to temporary files."""
    from tests.support.paths import ROOT

    site = site or ROOT
    procs, files = [], []
    try:
        for env in envs:
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            files.append((out, err))
            procs.append(
                subprocess.Popen(
                    [sys.executable, *map(str, argv)],
                    cwd=site,
                    env=rank_environment(env, site),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            )
    except BaseException:
        Job(procs, files, what).kill()
        raise
    return Job(procs, files, what)


def launch_tcp(
    np_, *argv, env=None, site=None, tf=False, timeout=120, what=None, per_rank_env=None, grace=10
):
    """`python ARGV...` on np_ ranks over TCP (torchrun's variables, a free MASTER_PORT whose
    next port is free too); env for every rank (and TF_ENV if `tf`), then per_rank_env[r] for
    rank r (a list, or a dict keyed by rank). Returns (returncode, stdout, stderr): the first
    non-zero exit code of any rank (or 0) and the ranks' outputs merged in rank order. Fails
    the test if it runs for more than `timeout` seconds; no rank outlives the call."""
    import pytest

    from tests.support.mpi import TF_ENV

    port = free_port(pair=True)
    envs = []
    for r in range(np_):
        mine = per_rank_env.get(r) if isinstance(per_rank_env, dict) else None
        if isinstance(per_rank_env, (list, tuple)):
            mine = per_rank_env[r]
        envs.append({**(TF_ENV if tf else {}), **torchrun_env(r, np_, port), **(env or {})})
        envs[-1].update(mine or {})
    what = what or f"{' '.join(map(str, argv))} on {np_} TCP ranks"
    job = start(envs, argv, site=site, what=what)
    try:
        hung = job.wait(timeout, grace)
    finally:
        job.kill()  # what is left: ranks (on an error) or what the ranks started
    outputs = job.outputs()
    out = "".join(o for o, _ in outputs)
    err = "".join(e for _, e in outputs)
    if hung:
        pytest.fail(f"{what} hung for more than {timeout} s:\n{out}\n{err}")
    return job.returncode(), out, err


def tcp_rank():
    """This process's rank under a TCP launcher (torchrun's RANK, or Gloo's HOROVOD_RANK)."""
    return int(os.environ.get("RANK", os.environ.get("HOROVOD_RANK", 0)))


def main():
    """`python tests/support/tcp.py PROGRAM [ARGS...]`: PROGRAM as __main__ with
    tests.support.scenario reporting the TCP rank (its verdict lines say "rank=<r>")."""
    program = sys.argv[1]
    from tests.support import scenario

    scenario.rank = tcp_rank
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(program))
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main()
