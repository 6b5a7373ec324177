"""The executor side of horovod.spark.run: one barrier task is one rank.

Each task finds its rank from the stage's task addresses (the same table on every task), starts
the rank as a child process (horovod/spark/child.py) with upstream's Gloo variables, relays the
child's output lines to the driver (horovod/spark/relay.py), stops the child when the driver says
so or goes away, and returns one record. It never raises into Spark: a failed rank is a record,
so Spark has nothing to retry and the driver decides what the job's error is.
"""

import collections
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from horovod.runner import tcp_rank
from horovod.spark import relay

# What a rank's work directory holds (horovod/spark/child.py reads and writes them; this module
# does not import it: `python -m horovod.spark.child` must find it not yet imported).
FN_FILE = "fn.pkl"
RESULT_FILE = "result.pkl"
Slot = collections.namedtuple("Slot", "rank host local_rank local_size cross_rank cross_size")
# SIGTERM to a rank's process group, then this long before SIGKILL.
GRACE_SECONDS = 5.0
# After the rank exited, how long what it started may hold its output pipes.
LEFTOVER_SECONDS = 2.0
# How long a task tries to reach the driver's relay.
CONNECT_SECONDS = 30.0
PR_SET_PDEATHSIG = 1


def assign_ranks(addresses):
    """[Slot] per task (partition order) from the tasks' "host:port" addresses. Ranks are
    grouped by host in order of first appearance (a host's ranks are consecutive, as under
    mpirun --map-by slot); local rank: the index among the host's tasks; cross rank: the host's
    index among the hosts that have that local rank; cross size: how many have it."""
    hosts = [a.rsplit(":", 1)[0] for a in addresses]
    order = list(dict.fromkeys(hosts))
    local_size = collections.Counter(hosts)
    by_host = {h: [i for i, x in enumerate(hosts) if x == h] for h in order}
    slots = [None] * len(hosts)
    rank = 0
    for host in order:
        for local, task in enumerate(by_host[host]):
            peers = [h for h in order if local_size[h] > local]
            slots[task] = Slot(rank, host, local, local_size[host], peers.index(host), len(peers))
            rank += 1
    return slots


def rank_env(job, slot):
    """The child's environment: the task's, the job's `env`, the rank's variables, the key."""
    env = dict(os.environ)
    env.update(job.env or {})
    rendezvous = (job.rendezvous_addr, job.rendezvous_port)
    env.update(tcp_rank.rank_variables(slot, job.size, rendezvous, job.iface))
    env["HOROVOD_SECRET_KEY"] = job.secret
    env["PYTHONUNBUFFERED"] = "1"  # fn's prints reach the driver as they happen
    if job.executable is None:
        # Same interpreter: the worker's import path (pyspark's cloudpickle, horovod) as it is.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def run_partition(job):
    """The function of the barrier stage's mapPartitions: one record per task."""

    def run_task(_rows):
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        addresses = [info.address for info in ctx.getTaskInfos()]
        slot = assign_ranks(addresses)[ctx.partitionId()]
        try:
            return [RankTask(job, slot).run()]
        except Exception:  # a bug here must not become a Spark task failure either
            error = f"the Spark task failed:\n{traceback.format_exc()}"
            return [{"rank": slot.rank, "host": slot.host, "stopped": None, "ok": False,
                     "exit_code": None, "error": error}]  # fmt: skip

    return run_task


def _preexec(parent):
    """The rank gets SIGKILL when the task's worker dies, even by SIGKILL."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec():
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the worker died before prctl
            os._exit(1)

    return preexec


def _killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class RankTask:
    """One rank's child process, its output relayed, seen through to a record."""

    def __init__(self, job, slot):
        self.job, self.slot = job, slot
        self.proc = None
        self.stopped = None  # why this task stopped its rank, if it did
        self.stop_since = None

    def record(self, **fields):
        return {"rank": self.slot.rank, "host": self.slot.host, "stopped": self.stopped, **fields}

    def run(self):
        workdir = tempfile.mkdtemp(prefix=f"horovod-spark-rank{self.slot.rank}-")
        try:
            try:
                link = relay.connect(
                    self.job.relay_addr, self.job.relay_port, self.job.relay_token,
                    self.slot.rank, CONNECT_SECONDS, self.slot.host,
                )  # fmt: skip
            except OSError as e:
                where = f"{self.job.relay_addr}:{self.job.relay_port}"
                return self.record(
                    ok=False, exit_code=None,
                    error=f"cannot reach the driver's output relay at {where}: {e}",
                )  # fmt: skip
            with link:
                with open(os.path.join(workdir, FN_FILE), "wb") as f:
                    f.write(self.job.payload)
                return self._run_child(link, workdir)
        finally:
            if self.proc is not None:  # the rank and whatever it left in its group
                _killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            shutil.rmtree(workdir, ignore_errors=True)

    def _run_child(self, link, workdir):
        argv = [self.job.executable or sys.executable, "-m", "horovod.spark.child", workdir]
        try:
            self.proc = subprocess.Popen(
                argv,
                env=rank_env(self.job, self.slot),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the rank and what it starts: one group to stop
                preexec_fn=_preexec(os.getpid()),
            )
        except OSError as e:
            link.send_failure()
            return self.record(ok=False, exit_code=None, error=f"cannot start {argv[0]}: {e}")
        self._supervise(link)
        rc = self.proc.returncode
        try:
            with open(os.path.join(workdir, RESULT_FILE), "rb") as f:
                result = f.read()
        except OSError:
            result = None
        ok = rc == 0 and result is not None
        if not ok and self.stopped is None:
            link.send_failure()
        return self.record(ok=ok, exit_code=rc, result=result)

    def _supervise(self, link):
        """Relays the child's lines until it has exited and closed its pipes; stops it on the
        driver's word or when the driver is gone. What the rank started and left holding its
        pipes is killed LEFTOVER_SECONDS after the rank exited."""
        sel = selectors.DefaultSelector()
        pipes = {self.proc.stdout: relay.STDOUT, self.proc.stderr: relay.STDERR}
        for pipe, tag in pipes.items():
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, selectors.EVENT_READ, relay.LineSplitter(tag, link.send_line))
        sel.register(link.sock, selectors.EVENT_READ, None)
        exited_at = None
        try:
            while pipes or exited_at is None:
                for key, _ in sel.select(0.2):
                    if key.data is None:
                        self._on_driver(link, sel)
                        continue
                    try:
                        chunk = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    key.data.feed(chunk)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        del pipes[key.fileobj]
                        key.fileobj.close()
                now = time.monotonic()
                if exited_at is None and self.proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > LEFTOVER_SECONDS:
                    _killpg(self.proc.pid, signal.SIGKILL)
                    if now - exited_at > LEFTOVER_SECONDS + 1.0:
                        break  # held by something outside the group: give up on the pipes
                elif self.stop_since is not None and now - self.stop_since > GRACE_SECONDS:
                    _killpg(self.proc.pid, signal.SIGKILL)
        finally:
            for key in list(sel.get_map().values()):
                sel.unregister(key.fileobj)
            for pipe in pipes:
                pipe.close()
            sel.close()
        self.proc.wait()

    def _on_driver(self, link, sel):
        """The driver's word: STOP (another rank failed), or EOF (the driver is gone)."""
        words = link.receive()
        if words is None:
            sel.unregister(link.sock)
            self._stop("its connection to the driver closed")
        elif relay.STOP in words:
            self._stop("the driver stopped it after another rank failed")

    def _stop(self, why):
        if self.stop_since is None and self.proc.poll() is None:
            self.stopped = why
            self.stop_since = time.monotonic()
            _killpg(self.proc.pid, signal.SIGTERM)
