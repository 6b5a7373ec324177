"""One barrier stage of ranks, launched and watched by the driver: horovod.spark.run runs one,
horovod.spark.run_elastic one per generation.

The driver serves the stage's rendezvous (the engine's RendezvousServer, a fresh secret) and
output relay (horovod/spark/relay.py) at spark.driver.host, runs the stage in a job group of its
own in a thread, and watches it through the relay:
- a task whose relay connection closes without END is LOST (its executor or Python worker
  died): Spark will not return its record, and aborts the stage (or would retry it into a
  rendezvous that is over), so the driver stops the other ranks and cancels the job group if
  Spark has not ended it LOST_GRACE_SECONDS later;
- after the first failed rank the driver stops the others (relay STOP: SIGTERM, SIGKILL 5 s
  later); a rank that has not ended STOPPED_BOUND_SECONDS later (its executor paused or cut
  off) is named and the job group cancelled.
The Outcome says which of these happened; the callers turn it into results or an error.
"""

import collections
import re
import secrets
import socket
import threading
import time
import uuid

from horovod.spark import task as rank_task
from horovod.spark.relay import DriverRelay

# After the first failed rank, how long the others have to end: 5 s from SIGTERM to SIGKILL,
# 2 s for what they left holding their pipes, and ample time for tasks still starting their
# rank's process on a loaded machine (it only ends a wait for a host that stopped answering).
STOPPED_BOUND_SECONDS = 60.0
# After a lost task, how long Spark has to abort the stage itself (it does within a second,
# saying why: ExecutorLostFailure ...) before the driver cancels its job group.
LOST_GRACE_SECONDS = 3.0
# After the job group was cancelled, how long Spark has to end the stage's collect().
CANCEL_BOUND_SECONDS = 30.0

# What the tasks need to run a rank (pickled into the stage's closure).
JobSpec = collections.namedtuple(
    "JobSpec",
    "size payload secret rendezvous_addr rendezvous_port relay_addr relay_port relay_token "
    "env iface executable",
)
# How the driver launches each stage: the caller's arguments, checked.
Options = collections.namedtuple(
    "Options", "start_timeout env iface executable stdout stderr timestamps verbose"
)


class Outcome:
    """What became of a stage: `records` (the tasks' records, None when Spark's job failed or
    was cancelled), `spark_error` (that exception), `lost` ([(rank, host)] whose task was lost,
    first first), `not_ended` ([(rank, host)] still running STOPPED_BOUND_SECONDS after the
    first failure), `failures` (ranks that reported FAIL, first first)."""

    def __init__(self, records, spark_error, lost, not_ended, failures, hosts):
        self.records, self.spark_error = records, spark_error
        self.lost, self.not_ended, self.failures, self.hosts = lost, not_ended, failures, hosts

    def spark_reason(self):
        """The executor-loss reason in Spark's error, if it gives one (e.g. "ExecutorLostFailure
        (executor 1 exited ...) Reason: Command exited with code 137")."""
        found = re.search(r"ExecutorLostFailure[^\n]*", str(self.spark_error or ""))
        return found.group(0).strip() if found else None


def driver_address(sc):
    """The address the executors reach the driver at (spark.driver.host), as an IP."""
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def launch(sc, size, payload, options, extra_env=None, log=None, what="horovod.spark.run"):
    """Runs `payload` (fn, args, kwargs pickled) on `size` ranks in one barrier stage; returns
    its Outcome. extra_env: variables for every rank on top of options.env."""
    from horovod.runner.rendezvous import RendezvousServer

    bind = driver_address(sc)
    secret, token = secrets.token_hex(32), secrets.token_hex(16)
    server = RendezvousServer()
    rdv_port = server.start(bind, size, secret, options.start_timeout)
    relay = None
    try:
        relay = DriverRelay(bind, token, options.stdout, options.stderr, options.timestamps)
        relay_port = relay.start()
        variables = {str(k): str(v) for k, v in (options.env or {}).items()}
        variables.update(extra_env or {})
        job = JobSpec(
            size, payload, secret, bind, rdv_port, bind, relay_port, token,
            variables, options.iface, options.executable,
        )  # fmt: skip
        if log is not None and options.verbose >= 2:
            log.info("rendezvous at %s:%d, output relay at %s:%d", bind, rdv_port, bind, relay_port)
        return watch(sc, job, relay, what)
    finally:
        if relay is not None:
            relay.close(expected=size)
        server.stop()


def watch(sc, job, relay, what):
    """Runs the stage in a thread and watches it through `relay` (see the module docstring)."""
    group = f"{what}-{uuid.uuid4().hex[:12]}"
    done = {}
    thread = threading.Thread(
        target=_collect, args=(sc, group, job, what, done), name=group, daemon=True
    )
    thread.start()
    lost, lost_at, not_ended, failed_at, cancelled_at = [], None, [], None, None
    try:
        while thread.is_alive():
            relay.news.wait(0.2)
            relay.news.clear()
            now = time.monotonic()
            if cancelled_at is not None:
                if now - cancelled_at > CANCEL_BOUND_SECONDS:
                    done.setdefault("error", RuntimeError(
                        f"{what}: Spark's job {group} did not end within "
                        f"{CANCEL_BOUND_SECONDS:g} s of being cancelled"
                    ))  # fmt: skip
                    break
                continue
            if relay.lost and not lost:
                lost, lost_at = [(r, relay.hosts.get(r, "?")) for r in relay.lost], now
                relay.stop_all()
            if lost and now - lost_at > LOST_GRACE_SECONDS:
                sc.cancelJobGroup(group)
                cancelled_at = now
                continue
            if relay.failures and failed_at is None:
                failed_at = now
            if failed_at is not None and now - failed_at > STOPPED_BOUND_SECONDS:
                not_ended = [(r, relay.hosts.get(r, "?")) for r in sorted(relay.hosts)
                             if r not in relay.finished]  # fmt: skip
                sc.cancelJobGroup(group)
                cancelled_at = now
        thread.join(1.0)
        if done.get("records") is None and not lost:
            # Spark ended the stage itself (it aborts a barrier stage whose executor was lost):
            # the lost task's connection closes at once, the others' when Spark kills them.
            deadline = time.monotonic() + 3.0
            while not relay.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            lost = [(r, relay.hosts.get(r, "?")) for r in relay.lost]
    except BaseException:
        sc.cancelJobGroup(group)  # e.g. Ctrl-C on the driver: the tasks end too
        thread.join(CANCEL_BOUND_SECONDS)
        raise
    return Outcome(
        done.get("records"), done.get("error"), lost, not_ended, list(relay.failures),
        dict(relay.hosts),
    )  # fmt: skip


def _collect(sc, group, job, what, done):
    """The thread's body: the stage's records, or Spark's exception, into `done`."""
    sc.setJobGroup(group, f"{what}: {job.size} ranks", interruptOnCancel=True)
    try:
        rdd = sc.parallelize(range(job.size), job.size)
        done["records"] = rdd.barrier().mapPartitions(rank_task.run_partition(job)).collect()
    except BaseException as e:  # handed to the driver's thread
        done["error"] = e
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
