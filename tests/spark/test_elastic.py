"""Executors lost and added under horovod.spark.run_elastic and run, and GPU pinning from the
tasks' resources, on one real Spark local-cluster (tests/spark/conftest.py's spark_with_gpus:
2 workers of 2 cores, each executor with two fake GPU addresses, each task one).

An executor is lost by SIGKILL of its JVM (found from inside fn: the rank's ancestor). The
local cluster's worker then starts a replacement executor (about 7 s on an idle machine):
run_elastic goes on with the remaining ranks and grows back when it registers."""

import io
import os
import re
import signal
import threading
import time

import pytest

import horovod.spark
from horovod.spark import ElasticJobError, RankFailedError
from horovod.spark.elastic import _sizes
from tests.spark import elastic_fns
from tests.spark.conftest import SLOTS, wait_for_slots
from tests.support import launched

# One run_elastic call of a few generations; minutes under load.
RUN_LIMIT_SECONDS = 300
# A replacement executor registers within this (JVM start; minutes on a loaded machine).
REGROW_SECONDS = 180


def bounded(spark, call, *args, limit=RUN_LIMIT_SECONDS, **kwargs):
    return launched.bounded(
        call, *args, limit=limit, on_timeout=spark.sparkContext.cancelAllJobs, **kwargs
    )


def read_pids(path):
    pid, executor = path.read_text().split()
    return int(pid), int(executor)


def alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ranks_left(pid_dir, pattern, timeout=15):
    """The rank processes (pids written by the ranks in pid_dir) still running after up to
    `timeout` seconds; machine-wide names would also find other jobs' ranks."""
    pids = [read_pids(path)[0] for path in pid_dir.glob(pattern)]
    assert pids, f"no rank wrote its pid to {pid_dir}"
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.1)


def kill_executor_at(pid_dir, rank, step, killed):
    """Waits for generation 0's rank 0 to commit `step`, then SIGKILLs the JVM of the executor
    running `rank`; `killed` gets the time and pids."""
    progress = pid_dir / "progress"

    def at_step():
        try:
            gen, done = (int(x) for x in progress.read_text().split())
        except (OSError, ValueError):
            return False
        return gen == 0 and done >= step and (pid_dir / f"g0-r{rank}").exists()

    def kill():
        deadline = time.monotonic() + RUN_LIMIT_SECONDS
        while not at_step():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        pid, executor = read_pids(pid_dir / f"g0-r{rank}")
        killed.update(t=time.time(), pid=pid, executor=executor)
        os.kill(executor, signal.SIGKILL)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_an_executor_lost_mid_run_goes_on_from_the_last_commit_and_grows_back(
    spark_with_gpus, tmp_path
):
    store = tmp_path / "store"
    out = io.StringIO()
    killed = {}
    killer = kill_executor_at(tmp_path, rank=3, step=5, killed=killed)
    got = bounded(
        spark_with_gpus,
        horovod.spark.run_elastic,
        elastic_fns.elastic_steps,
        args=(8, str(tmp_path)),
        kwargs={"delay": 0.2, "until_sizes": [4, 2, 4], "cap": 2000},
        num_proc=4,
        min_num_proc=2,
        max_num_proc=4,
        env={"HOROVOD_ELASTIC_STORE": str(store)},
        stdout=out,
    )
    killer.join(1)
    assert killed, "the executor was not killed"
    # The job went 4 -> 2 (one executor's two tasks lost) -> 4 (its replacement added).
    assert [r["rank"] for r in got] == [0, 1, 2, 3]
    assert all(r["sizes"] == [4, 2, 4] for r in got), got
    assert got[0]["gen"] >= 2
    # Every step counted once, on every rank, across the rollbacks: a consistent state.
    assert all(r["w"] == r["step"] == got[0]["step"] for r in got), got
    steps = [(int(g), int(s), float(t)) for g, s, t in
             re.findall(r"STEP gen=(\d+) step=(\d+) t=([\d.]+)", out.getvalue())]  # fmt: skip
    before = max(s for g, s, _ in steps if g == 0)
    first_after = min((t, s) for g, s, t in steps if g == 1)
    assert first_after[1] <= before + 1  # resumed from the last commit, not from the start
    print(f"\nexecutor lost -> training again: {first_after[0] - killed['t']:.1f} s")
    assert ranks_left(tmp_path, "g*-r*") == []
    assert not store.exists() or not any(store.iterdir()), "the commit files were left"
    wait_for_slots(spark_with_gpus.sparkContext, SLOTS, REGROW_SECONDS)


def test_a_rank_killed_is_a_reset_and_reset_limit_ends_the_job_saying_so(spark_with_gpus, tmp_path):
    with pytest.raises(ElasticJobError, match=r"reset 1 is over reset_limit=0.*killed"):
        bounded(
            spark_with_gpus,
            horovod.spark.run_elastic,
            elastic_fns.kill_self_in_first_generation,
            args=(str(tmp_path),),
            num_proc=2,
            reset_limit=0,
            stdout=io.StringIO(),
        )
    (tmp_path / "progress").unlink()
    got = bounded(
        spark_with_gpus,
        horovod.spark.run_elastic,
        elastic_fns.kill_self_in_first_generation,
        args=(str(tmp_path),),
        num_proc=2,
        reset_limit=1,
        stdout=io.StringIO(),
    )
    assert [(r["rank"], r["gen"], r["w"]) for r in got] == [(0, 1, 3.0), (1, 1, 3.0)]


def test_too_few_slots_within_elastic_timeout_is_a_clear_error(spark_with_gpus):
    start = time.monotonic()
    with pytest.raises(
        ElasticJobError,
        match=rf"needed {SLOTS + 1} task slot\(s\) \(min_num_proc\) but for 2 s "
        rf"\(elastic_timeout\) the cluster had {SLOTS}",
    ):
        bounded(
            spark_with_gpus,
            horovod.spark.run_elastic,
            elastic_fns.raise_on_rank_1,
            num_proc=SLOTS + 1,
            elastic_timeout=2,
            limit=60,
        )
    assert time.monotonic() - start < 30


def test_fns_own_error_ends_the_elastic_job_without_a_reset(spark_with_gpus):
    with pytest.raises(RankFailedError, match=r"rank 1 of 2 .*an error of fn's own") as info:
        bounded(
            spark_with_gpus,
            horovod.spark.run_elastic,
            elastic_fns.raise_on_rank_1,
            num_proc=2,
            stderr=io.StringIO(),
        )
    assert info.value.exc_type == "builtins.ValueError"


def test_run_names_the_lost_rank_and_host_when_its_executor_is_killed(spark_with_gpus, tmp_path):
    wait_for_slots(spark_with_gpus.sparkContext, SLOTS, REGROW_SECONDS)
    killed = {}

    def kill():
        wait_for(lambda: (tmp_path / "r1").exists(), RUN_LIMIT_SECONDS, "rank 1's start")
        pid, executor = read_pids(tmp_path / "r1")
        killed.update(t=time.monotonic(), pid=pid, executor=executor)
        os.kill(executor, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()
    with pytest.raises(RankFailedError) as info:
        bounded(
            spark_with_gpus,
            horovod.spark.run,
            elastic_fns.sleep_in_allreduce,
            args=(str(tmp_path), 120),
            num_proc=SLOTS,
            start_timeout=RUN_LIMIT_SECONDS,
        )
    took = time.monotonic() - killed["t"]
    # The killed executor ran two tasks: either rank may be the one named.
    on_it = [r for r in range(SLOTS) if read_pids(tmp_path / f"r{r}")[1] == killed["executor"]]
    assert info.value.rank in on_it and len(on_it) == 2, (on_it, str(info.value))
    assert re.search(
        rf"rank {info.value.rank} of 4 \(host 127\.0\.0\.1\) was lost", str(info.value)
    )
    assert "ExecutorLostFailure" in str(info.value)
    assert took < 30, f"run() took {took:.1f} s to fail after the executor was killed"
    # No rank process is left, on the killed executor or the others.
    assert ranks_left(tmp_path, "r*") == []
    wait_for_slots(spark_with_gpus.sparkContext, SLOTS, REGROW_SECONDS)


def test_a_gpu_task_is_pinned_to_its_address_at_its_local_rank(spark_with_gpus):
    wait_for_slots(spark_with_gpus.sparkContext, SLOTS, REGROW_SECONDS)
    got = bounded(spark_with_gpus, horovod.spark.run, elastic_fns.gpu_view, num_proc=SLOTS)
    # One host (127.0.0.1): every rank sees the four addresses in local-rank order, and device
    # hvd.local_rank() is the address Spark gave its task.
    visible = {r["visible"] for r in got}
    assert len(visible) == 1, got
    order = visible.pop().split(",")
    assert sorted(order) == ["0", "1", "2", "3"], got
    for r in got:
        assert r["devices"] == [str(r["local_rank"])], got
        assert order[r["local_rank"]] == r["addresses"], got


@pytest.mark.parametrize(
    "args, want",
    [
        ((None, None, None, 4), (4, 4, 4)),  # upstream's defaults: all from num_proc
        ((4, 2, 6, 8), (4, 2, 6)),
        ((1, 2, 6, 8), (2, 2, 6)),  # num_proc within [min, max]
        ((8, 2, 6, 8), (6, 2, 6)),
    ],
)
def test_sizes_take_upstreams_defaults(args, want):
    assert _sizes(*args) == want


def test_bad_sizes_are_refused_naming_them():
    with pytest.raises(ValueError, match="min_num_proc=5 is more than max_num_proc=3"):
        _sizes(4, 5, 3, 4)
    with pytest.raises(ValueError, match="max_num_proc must be a positive integer"):
        _sizes(4, 1, 0, 4)
