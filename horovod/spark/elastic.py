"""horovod.spark.run_elastic: tasks lost or added while the job runs (upstream 0.28.1's signature).

The engine cannot be initialized twice in a process, so the job re-forms as horovodrun's
elastic driver re-forms it (horovod/runner/elastic_driver.py): as GENERATIONS of fresh rank
processes, here one barrier stage each (horovod/spark/stage.py). The driver asks Spark how many
task slots the cluster has (the executors' cores), runs a generation on min(max_np, slots)
ranks once at least min_np are there (waiting at most elastic_timeout), and:
- the ranks run under the elastic worker protocol (horovod/common/elastic_worker.py):
  `state.commit()` writes the state to /dev/shm on the rank's host, and rank 0 asks the
  driver's HTTP channel (horovod/runner/elastic_channel.py) whether the slots changed;
- an executor lost mid-generation: Spark aborts the barrier stage and the driver sees the lost
  task on the relay; the survivors' ranks exit for a relaunch;
- more slots than the generation uses (an executor added, and room under max_np): rank 0's
  next commit hears "changed" and every rank exits for a relaunch at that commit;
- the next generation resumes from the newest commit any of its ranks' hosts holds;
- a generation that fails with no rank lost, no relaunch asked and no change of slots is
  fn's own error: raised as horovod.spark.run raises it, without a retry; after reset_limit
  resets the job ends saying so.
The last generation's results are returned in rank order. The commit files are removed at the
end by a small Spark job over the executors (best effort: see docs/spark.md).
"""

import logging
import os
import secrets
import sys
import threading
import time
import uuid
import warnings

from horovod.runner import tcp_rank
from horovod.runner.elastic_channel import Channel
from horovod.spark import runner, stage
from horovod.spark.errors import ElasticJobError

log = logging.getLogger("horovod.spark")

# Upstream's default for elastic_timeout (also read from HOROVOD_ELASTIC_TIMEOUT).
DEFAULT_ELASTIC_TIMEOUT = 600.0
# How often the driver asks Spark for its task slots.
SLOTS_POLL_SECONDS = 0.5
# The commit files' cleanup job at the end: at most this long.
CLEANUP_SECONDS = 30.0
STORE_DEFAULT = "/dev/shm/horovod-elastic"


def run_elastic(
    fn,
    args=(),
    kwargs={},  # noqa: B006  (upstream's signature; never mutated)
    num_proc=None,
    min_num_proc=None,
    max_num_proc=None,
    start_timeout=None,
    elastic_timeout=None,
    reset_limit=None,
    env=None,
    stdout=None,
    stderr=None,
    verbose=1,
    nics=None,
    prefix_output_with_timestamp=False,
    min_np=None,
    max_np=None,
):
    """Runs fn(*args, **kwargs), which uses `hvd.elastic.run` with a state, on at least
    min_num_proc and at most max_num_proc ranks (defaults: num_proc, itself defaulting to
    sc.defaultParallelism), going on from the last commit when tasks are lost or added; returns
    the last generation's results in rank order. min_np/max_np: upstream's deprecated names.

    start_timeout: seconds for a generation's tasks to start and meet. elastic_timeout: seconds
    to wait for min_num_proc task slots (default HOROVOD_ELASTIC_TIMEOUT, else 600).
    reset_limit: resets after which the job ends. env, stdout, stderr, verbose, nics,
    prefix_output_with_timestamp: as horovod.spark.run.

    Raises ValueError (bad arguments), SparkSetupError (nothing launched), RankFailedError (fn
    failed on a rank by itself) or ElasticJobError (too few slots within elastic_timeout, or
    more resets than reset_limit).
    """
    min_num_proc = _deprecated(min_np, "min_np", "min_num_proc", min_num_proc)
    max_num_proc = _deprecated(max_np, "max_np", "max_num_proc", max_num_proc)
    iface = tcp_rank.single_interface(nics, "horovod.spark.run_elastic")
    timeout = runner.start_timeout_seconds(start_timeout)
    wait = _elastic_timeout_seconds(elastic_timeout)
    if reset_limit is not None and (not isinstance(reset_limit, int) or reset_limit < 0):
        raise ValueError(
            f"horovod.spark.run_elastic: reset_limit must be a non-negative integer or None, "
            f"not {reset_limit!r}"
        )
    sc = runner.active_spark_context()
    sizes = _sizes(num_proc, min_num_proc, max_num_proc, sc.defaultParallelism)
    payload = runner.pickle_fn(fn, args, kwargs)
    options = stage.Options(
        timeout, env, iface, None, stdout or sys.stdout, stderr or sys.stderr,
        prefix_output_with_timestamp, verbose,
    )  # fmt: skip
    return ElasticJob(sc, payload, options, sizes, wait, reset_limit).run()


def _own_failure(record):
    """A rank that failed by itself: fn raised there (not a collateral HorovodInternalError) or
    it exited with a code of its own; not one stopped by the driver, killed by a signal or
    leaving for a relaunch."""
    if record["ok"] or record["stopped"] is not None:
        return False
    code = record.get("exit_code")
    if code == runner.RELAUNCH_EXIT_CODE or (code is not None and code < 0):
        return False
    error = runner._error_outcome(record)
    if error is not None:
        return error.get("type") not in runner.COLLATERAL_TYPES
    return code is not None or bool(record.get("error"))


def _deprecated(old, old_name, new_name, new):
    if old is None:
        return new
    warnings.warn(f"{old_name} is deprecated, use {new_name} instead", DeprecationWarning, 3)
    return old


def _elastic_timeout_seconds(value):
    if value is None:
        value = os.environ.get("HOROVOD_ELASTIC_TIMEOUT") or DEFAULT_ELASTIC_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"horovod.spark.run_elastic: elastic_timeout={value!r}: expected seconds"
        ) from None
    if seconds < 0:
        raise ValueError(f"horovod.spark.run_elastic: elastic_timeout={value!r} is negative")
    return seconds


def _sizes(num_proc, min_np, max_np, default):
    """(num_proc, min, max) checked, with upstream's defaults: num_proc from Spark's default
    parallelism, min and max from num_proc."""
    num_proc = default if num_proc is None else num_proc
    min_np = num_proc if min_np is None else min_np
    max_np = num_proc if max_np is None else max_np
    for name, value in (("num_proc", num_proc), ("min_num_proc", min_np), ("max_num_proc", max_np)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(
                f"horovod.spark.run_elastic: {name} must be a positive integer, not {value!r}"
            )
    if not min_np <= max_np:
        raise ValueError(
            f"horovod.spark.run_elastic: min_num_proc={min_np} is more than max_num_proc={max_np}"
        )
    return min(max(num_proc, min_np), max_np), min_np, max_np


class ElasticJob:
    """The generations of one run_elastic call, one after another."""

    def __init__(self, sc, payload, options, sizes, elastic_timeout, reset_limit):
        self.sc, self.payload, self.options = sc, payload, options
        self.num_proc, self.min_np, self.max_np = sizes
        self.elastic_timeout, self.reset_limit = elastic_timeout, reset_limit
        self.job_id = uuid.uuid4().hex[:12]
        self.token = secrets.token_hex(16)
        self.lock = threading.Lock()
        self.generation = 0
        self.size = 0  # ranks of the running generation (0 between generations)
        self.changed = False  # more slots than the running generation uses
        self.requests = []  # the ranks' relaunch requests in the running generation
        self.launched = False  # a generation started (there may be commit files)
        self.channel = Channel(self.token, self._answer, self._record)

    # -- the channel: rank 0 asks at each commit, a rank leaving says why --------------------
    def _answer(self, asked):
        with self.lock:
            changed = self.changed and asked == str(self.generation)
            return {"changed": changed, "generation": self.generation}

    def _record(self, body):
        with self.lock:
            self.requests.append(body)

    # -- the generations ------------------------------------------------------------------
    def run(self):
        self.channel.start()
        resets = 0
        try:
            while True:
                slots = self._wait_for_slots()
                size = min(slots, self.max_np)
                if self.generation == 0:
                    size = min(size, self.num_proc)
                started = time.monotonic()
                outcome = self._run_generation(size)
                why = self._verdict(outcome, size)
                if why is None:
                    log.info("horovod.spark.run_elastic: generation %d finished", self.generation)
                    return runner.results(outcome.records, outcome.failures, size)
                resets += 1
                log.warning(
                    "horovod.spark.run_elastic: generation %d (%d ranks) ended after %.1f s: %s; "
                    "reset %d%s",
                    self.generation, size, time.monotonic() - started, why, resets,
                    f" of {self.reset_limit}" if self.reset_limit is not None else "",
                )  # fmt: skip
                if self.reset_limit is not None and resets > self.reset_limit:
                    raise ElasticJobError(
                        f"horovod.spark.run_elastic: reset {resets} is over reset_limit="
                        f"{self.reset_limit} (generation {self.generation} ended: {why}); "
                        "ending the job"
                    )
                self.generation += 1
        finally:
            self.channel.shutdown()
            self._remove_commits()

    def _wait_for_slots(self):
        """The cluster's task slots once there are >= min_np, or ElasticJobError after
        elastic_timeout."""
        deadline = time.monotonic() + self.elastic_timeout
        said = False
        while True:
            slots = runner.task_slots(self.sc)
            if slots >= self.min_np:
                return slots
            if time.monotonic() >= deadline:
                raise ElasticJobError(
                    f"horovod.spark.run_elastic: needed {self.min_np} task slot(s) "
                    f"(min_num_proc) but for {self.elastic_timeout:g} s (elastic_timeout) the "
                    f"cluster had {slots}; ending the job before generation {self.generation}"
                )
            if not said:
                log.warning(
                    "horovod.spark.run_elastic: waiting up to %g s for %d task slot(s); the "
                    "cluster has %d", self.elastic_timeout, self.min_np, slots,
                )  # fmt: skip
                said = True
            time.sleep(SLOTS_POLL_SECONDS)

    def _run_generation(self, size):
        """One generation on `size` ranks, its slots watched in a thread meanwhile."""
        with self.lock:
            self.size, self.changed, self.requests = size, False, []
        self.launched = True
        if self.options.verbose >= 1:
            log.info("horovod.spark.run_elastic: generation %d: %d rank(s)", self.generation, size)
        port = self.channel.server.server_address[1]
        extra = {
            "HOROVOD_ELASTIC": "1",
            "HOROVOD_ELASTIC_JOB_ID": self.job_id,
            "HOROVOD_ELASTIC_GENERATION": str(self.generation),
            "HOROVOD_ELASTIC_DRIVER": f"{stage.driver_address(self.sc)}:{port}",
            "HOROVOD_ELASTIC_TOKEN": self.token,
        }
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch_slots, args=(stop,), daemon=True)
        watcher.start()
        try:
            return stage.launch(
                self.sc, size, self.payload, self.options, extra, log, "horovod.spark.run_elastic"
            )
        finally:
            stop.set()
            watcher.join()
            with self.lock:
                self.size = 0

    def _watch_slots(self, stop):
        """Marks the generation changed once the cluster has more slots than it uses and there
        is room under max_np (rank 0 hears it at its next commit). Fewer slots need no mark:
        Spark aborts a barrier stage whose executor is lost."""
        while not stop.wait(SLOTS_POLL_SECONDS):
            slots = runner.task_slots(self.sc)
            with self.lock:
                grow = self.size and slots > self.size and self.size < self.max_np
                if grow and not self.changed:
                    self.changed = True
                    log.warning(
                        "horovod.spark.run_elastic: generation %d: the cluster has %d task "
                        "slots (%d used); the ranks re-form at their next commit",
                        self.generation, slots, self.size,
                    )  # fmt: skip

    def _verdict(self, outcome, size):
        """None when the generation finished; why it must be reset (words for the log); or
        raises fn's own error (a failure with no rank lost, no relaunch and no change)."""
        with self.lock:
            requests, changed = list(self.requests), self.changed
        why = []
        if outcome.lost:
            rank, host = outcome.lost[0]
            reason = outcome.spark_reason()
            why.append(f"rank {rank} (host {host}) was lost" + (f" ({reason})" if reason else ""))
        why += [f"rank {r} (host {h}) did not end once stopped" for r, h in outcome.not_ended]
        records = outcome.records or []
        own = [r for r in records if _own_failure(r)]
        if own and not outcome.lost:
            return runner.outcome_results(outcome, size)  # raises the root-cause rank's error
        relaunched = [r["rank"] for r in records if r.get("exit_code") == runner.RELAUNCH_EXIT_CODE]
        if requests or relaunched:
            reason = requests[0].get("reason", "?") if requests else "exit 75"
            why.append(
                f"{max(len(requests), len(relaunched))} rank(s) exited for a relaunch: {reason}"
            )
        killed = [r for r in records if (r.get("exit_code") or 0) < 0 and r["stopped"] is None]
        why += [f"rank {r['rank']} (host {r['host']}) was killed" for r in killed]
        if changed:
            why.append("the cluster's task slots changed")
        if why:
            return "; ".join(why)
        if outcome.records is None:
            raise outcome.spark_error
        if all(r["ok"] for r in records) and len(records) == size:
            return None
        return runner.outcome_results(outcome, size)  # raises the root-cause rank's error

    def _remove_commits(self):
        """Removes the job's commit files on the executors' hosts: one small job of as many
        tasks as there are slots (Spark spreads them; a host it does not reach keeps its files
        in memory until reboot, named by the job's id)."""
        store = (self.options.env or {}).get("HOROVOD_ELASTIC_STORE") or STORE_DEFAULT
        path = os.path.join(str(store), self.job_id)
        count = runner.task_slots(self.sc)
        if not self.launched or count < 1:
            return  # nothing ran, or no executor to reach (a job would wait for one)
        group = f"horovod.spark.run_elastic-cleanup-{self.job_id}"

        def remove(_rows):
            import shutil

            shutil.rmtree(path, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(path))  # only when no other job uses the store
            except OSError:
                pass
            return []

        def cleanup():
            self.sc.setJobGroup(group, "horovod.spark.run_elastic: remove commit files", True)
            try:
                self.sc.parallelize(range(count), count).mapPartitions(remove).collect()
            except Exception as e:  # best effort: the job's outcome stands
                log.debug("horovod.spark.run_elastic: commit cleanup: %s", e)

        thread = threading.Thread(target=cleanup, daemon=True)
        thread.start()
        thread.join(CLEANUP_SECONDS)
        if thread.is_alive():
            self.sc.cancelJobGroup(group)
            log.warning(
                "horovod.spark.run_elastic: removing the commit files (%s) took over %g s; "
                "cancelled", path, CLEANUP_SECONDS,
            )  # fmt: skip
