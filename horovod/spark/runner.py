"""horovod.spark.run: the driver's side (upstream 0.28.1's signature).

The driver checks the request (transport, SparkContext, task slots, fn picklable), serves the
job's rendezvous (the engine's RendezvousServer, fresh secret) and the output relay where the
executors reach it (spark.driver.host), then runs ONE barrier stage of num_proc tasks, each a
rank (horovod/spark/task.py), watched by horovod/spark/stage.py, and turns the tasks' records
into fn's results in rank order, or into the failed or lost rank's error.

Why records and not exceptions: a task that raised would make Spark retry the barrier stage
(all ranks again, up to spark.stage.maxConsecutiveAttempts), re-running fn after a failure. A
task returns its rank's failure as a record instead; the driver stops the other ranks through
the relay at the first failure, so every task ends promptly, and raises the root cause.
"""

import logging
import os
import sys
import time

from horovod.runner import tcp_rank
from horovod.spark import stage
from horovod.spark.errors import RankFailedError, SparkSetupError

log = logging.getLogger("horovod.spark")

# Upstream's default for start_timeout (also read from HOROVOD_SPARK_START_TIMEOUT).
DEFAULT_START_TIMEOUT = 600.0
# With fewer slots than ranks, how long the slot count must stay unchanged before giving up
# (executors of a starting application register one after another).
SLOTS_SETTLE_SECONDS = 5.0
# Exception types that are a consequence of another rank's failure, not a cause.
COLLATERAL_TYPES = (
    "horovod.common.exceptions.HorovodInternalError",
    "horovod.common.exceptions.HorovodShutdownError",  # a peer exited or shut down
)
# A rank of run_elastic that left for a relaunch: collateral. The value of
# horovod/common/elastic_worker.py, not imported: the driver needs no numpy.
RELAUNCH_EXIT_CODE = 75


def run(
    fn,
    args=(),
    kwargs={},  # noqa: B006  (upstream's signature; never mutated)
    num_proc=None,
    start_timeout=None,
    use_mpi=None,
    use_gloo=None,
    extra_mpi_args=None,
    env=None,
    stdout=None,
    stderr=None,
    verbose=1,
    nics=None,
    prefix_output_with_timestamp=False,
    executable=None,
):
    """Runs fn(*args, **kwargs) on num_proc ranks (default: sc.defaultParallelism), one per
    task of a Spark barrier stage, and returns its results as a list in rank order.

    Inside fn, `hvd.init()` needs no argument. The ranks use the TCP transport: use_mpi=True and
    extra_mpi_args are refused. env: variables added to each rank's environment (on top of the
    executor's). stdout/stderr: text files for the ranks' output lines, `[rank]<stdout>:...`
    (default: sys.stdout/sys.stderr). nics: one network interface for the ranks' links.
    start_timeout: seconds for the tasks to start and meet (default HOROVOD_SPARK_START_TIMEOUT,
    else 600). executable: the Python that runs each rank (default: the executor's).

    Raises ValueError (bad arguments), SparkSetupError (nothing launched: no SparkContext, too
    few task slots, fn not picklable) or RankFailedError (a rank failed; it names the rank).
    """
    check_transport(use_mpi, use_gloo, extra_mpi_args)
    iface = tcp_rank.single_interface(nics, "horovod.spark.run")
    timeout = start_timeout_seconds(start_timeout)
    sc = active_spark_context()
    inferred = num_proc is None
    if inferred:
        num_proc = sc.defaultParallelism
    if not isinstance(num_proc, int) or num_proc < 1:
        raise ValueError(
            f"horovod.spark.run: num_proc must be a positive integer, not {num_proc!r}"
        )
    payload = pickle_fn(fn, args, kwargs)
    check_slots(sc, num_proc, timeout)
    if verbose >= 1:
        why = " (inferred from spark.default.parallelism)" if inferred else ""
        log.info("Running %d processes%s...", num_proc, why)
    options = stage.Options(
        timeout, env, iface, executable, stdout or sys.stdout, stderr or sys.stderr,
        prefix_output_with_timestamp, verbose,
    )  # fmt: skip
    outcome = stage.launch(sc, num_proc, payload, options, log=log)
    return outcome_results(outcome, num_proc)


def check_transport(use_mpi, use_gloo, extra_mpi_args):
    if use_mpi:
        raise ValueError(
            "horovod.spark.run: use_mpi=True is not supported: the ranks form the job over "
            "Horovod's TCP transport (use_gloo, the default); drop use_mpi"
        )
    if use_gloo is False:
        raise ValueError(
            "horovod.spark.run: use_gloo=False leaves no transport: horovod.spark runs over "
            "the TCP transport only; drop use_gloo"
        )
    if extra_mpi_args:
        raise ValueError(
            "horovod.spark.run: extra_mpi_args is for mpirun, which horovod.spark does not use "
            "(the ranks run over the TCP transport); drop it"
        )


def start_timeout_seconds(start_timeout):
    if start_timeout is not None:
        return float(start_timeout)
    value = os.environ.get("HOROVOD_SPARK_START_TIMEOUT")
    if not value:
        return DEFAULT_START_TIMEOUT
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"HOROVOD_SPARK_START_TIMEOUT={value!r}: expected a number of seconds"
        ) from None


def active_spark_context():
    """The running classic SparkContext; a clear error under Spark Connect or without one."""
    try:
        from pyspark import SparkContext
    except ImportError as e:
        raise SparkSetupError(f"horovod.spark needs pyspark ({e})") from e
    sc = getattr(SparkContext, "_active_spark_context", None)
    if sc is not None:
        return sc
    connect = os.environ.get("SPARK_CONNECT_MODE_ENABLED") or os.environ.get("SPARK_REMOTE")
    why = (
        "this is a Spark Connect session, which has no SparkContext"
        if connect
        else "none is running in this process"
    )
    raise SparkSetupError(
        "horovod.spark.run needs a classic SparkContext (pyspark.SparkContext, e.g. "
        f"SparkSession.builder.master(...).getOrCreate() without .remote()); {why}"
    )


def pickle_fn(fn, args, kwargs):
    """(fn, args, kwargs) pickled with pyspark's cloudpickle, or an error naming fn."""
    from pyspark import cloudpickle

    try:
        return cloudpickle.dumps((fn, tuple(args), dict(kwargs)))
    except Exception as e:
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise SparkSetupError(
            f"horovod.spark.run: cannot pickle fn {name} with its arguments to send it to the "
            f"executors: {type(e).__name__}: {e}"
        ) from e


def task_slots(sc):
    """How many tasks the cluster runs at once (what Spark's barrier check counts); falls back
    to defaultParallelism where the JVM's count cannot be read."""
    try:
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:
        return sc.defaultParallelism


def check_slots(sc, num_proc, timeout):
    """Raises SparkSetupError naming both numbers when the cluster has fewer task slots than
    num_proc: once the count has stayed unchanged SLOTS_SETTLE_SECONDS, or after `timeout`
    while no executor is up. (Spark's own barrier check would retry for minutes.)"""
    start = changed = time.monotonic()
    slots = task_slots(sc)
    while slots < num_proc:
        now = time.monotonic()
        if (slots > 0 and now - changed >= SLOTS_SETTLE_SECONDS) or now - start >= timeout:
            raise SparkSetupError(
                f"horovod.spark.run: num_proc={num_proc} but the cluster has {slots} task "
                f"slot(s); a barrier stage needs one slot per rank at once: give fewer "
                "processes or more executors/cores"
            )
        time.sleep(0.25)
        now_slots = task_slots(sc)
        if now_slots != slots:
            slots, changed = now_slots, time.monotonic()


def outcome_results(outcome, size):
    """fn's results in rank order from a stage's Outcome, or the error that names why not: a
    lost rank (its executor died), a rank that did not end once stopped, Spark's own error, or
    the root-cause rank's failure."""
    if outcome.lost:
        rank, host = outcome.lost[0]
        why = outcome.spark_reason()
        raise RankFailedError(
            f"horovod.spark.run: rank {rank} of {size} (host {host}) was lost: its Spark task "
            "ended without a result (its executor or Python worker died)"
            + (f"; Spark: {why}" if why else ""),
            rank, host,
        )  # fmt: skip
    if outcome.not_ended:
        named = ", ".join(f"rank {r} (host {h})" for r, h in outcome.not_ended)
        rank, host = outcome.not_ended[0]
        first = outcome.failures[0] if outcome.failures else "?"
        raise RankFailedError(
            f"horovod.spark.run: {named} of {size} did not end within "
            f"{stage.STOPPED_BOUND_SECONDS:g} s of being stopped after rank {first} failed "
            "(its executor paused or cut off?); the job was cancelled",
            rank, host,
        )  # fmt: skip
    if outcome.records is None:
        raise outcome.spark_error
    return results(outcome.records, outcome.failures, size)


def results(records, failures, size):
    """fn's results in rank order, or RankFailedError for the root-cause rank."""
    records = sorted(records, key=lambda r: r["rank"])
    failed = [r for r in records if not r["ok"]]
    if failed:
        raise rank_error(root_cause(failed, failures), size)
    from pyspark import cloudpickle

    values = []
    for r in records:
        try:
            values.append(cloudpickle.loads(cloudpickle.loads(r["result"])["value"]))
        except Exception as e:
            raise RankFailedError(
                f"horovod.spark.run: the result of fn on rank {r['rank']} of {size} (host "
                f"{r['host']}) cannot be unpickled on the driver: {type(e).__name__}: {e}",
                r["rank"],
                r["host"],
            ) from e
    return values


def root_cause(failed, failures):
    """The failed record to report: a rank whose fn raised an error of its own (even if the
    driver's STOP reached it while it was exiting: its peers' collateral errors come first
    then), else one not stopped by the driver and without a collateral error (a peer left),
    first by the order the driver heard of."""
    order = {rank: i for i, rank in reversed(list(enumerate(failures)))}

    def key(r):
        error = _error_outcome(r)  # None too for a rank whose fn returned before the STOP
        raised = error is not None and error.get("type") not in COLLATERAL_TYPES
        collateral = (error is not None and not raised) or r.get("exit_code") == RELAUNCH_EXIT_CODE
        stopped = r["stopped"] is not None
        return (not raised, stopped, collateral, order.get(r["rank"], len(order)), r["rank"])

    return min(failed, key=key)


def _outcome(record):
    if not record.get("result"):
        return None
    from pyspark import cloudpickle

    try:
        return cloudpickle.loads(record["result"])
    except Exception:
        return None


def _error_outcome(record):
    """The rank's fn error ({type, text, traceback, exception}), or None: no outcome, or fn
    returned (a rank the driver stopped after its fn had ended counts as failed too)."""
    outcome = _outcome(record)
    return None if outcome is None or outcome.get("ok") else outcome


def rank_error(record, size):
    rank, host = record["rank"], record["host"]
    where = f"rank {rank} of {size} (host {host})"
    outcome = _error_outcome(record)
    if outcome is None:
        if record.get("error"):
            text = f"horovod.spark.run: {where} could not run: {record['error']}"
        else:
            text = f"horovod.spark.run: {where} {describe_exit(record['exit_code'])}"
            if record["stopped"]:
                text += f" ({record['stopped']})"
        return RankFailedError(text, rank, host, exit_code=record.get("exit_code"))
    text = (
        f"horovod.spark.run: {where} raised {outcome['type']}: {outcome['text']}\n\n"
        f"Traceback on rank {rank}:\n{outcome['traceback'].rstrip()}"
    )
    error = RankFailedError(
        text, rank, host, outcome["type"], outcome["traceback"], record.get("exit_code")
    )
    if outcome.get("exception") is not None:
        from pyspark import cloudpickle

        try:
            error.__cause__ = cloudpickle.loads(outcome["exception"])
        except Exception:
            pass  # its class is not importable here: the text says what it was
    return error


def describe_exit(code):
    if code is None:
        return "ended without a result"
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"was killed by signal {name} before fn returned"
    return f"exited with code {code} before fn returned"
