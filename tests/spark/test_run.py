"""horovod.spark.run on a real Spark local-cluster (tests/spark/conftest.py): results in rank
order with each rank's view of the job, an allreduce across the ranks, Keras training, the
ranks' output on the driver, a rank that raises or exits, and the errors raised before anything
is launched. Every run is bounded (run_bounded) so that a hang fails the test."""

import io
import os
import threading
import time

import pytest

import horovod.spark
from horovod.spark import RankFailedError, SparkSetupError
from tests.spark import rank_fns
from tests.spark.conftest import SLOTS
from tests.support import launched, procs

# One run: the tasks start (Python workers fork), the ranks meet, fn runs; minutes under load.
RUN_LIMIT_SECONDS = 300


def run_bounded(spark, fn, limit=RUN_LIMIT_SECONDS, **kwargs):
    """horovod.spark.run bounded by `limit` seconds: a run still going then has its Spark jobs
    cancelled and fails the test."""
    return launched.bounded(
        horovod.spark.run,
        fn,
        limit=limit,
        on_timeout=spark.sparkContext.cancelAllJobs,
        start_timeout=limit,
        **kwargs,
    )


@pytest.mark.parametrize("np_", [2, 3])
def test_results_in_rank_order_with_each_ranks_view_and_an_allreduce(spark, np_):
    got = run_bounded(spark, rank_fns.identity_and_sum, args=("x",), num_proc=np_)
    assert [r["rank"] for r in got] == list(range(np_))
    # Every executor of the local cluster is on this one host: one local group, one cross rank.
    for r in got:
        assert (r["tag"], r["size"], r["local_size"]) == ("x", np_, np_)
        assert (r["local_rank"], r["cross_rank"], r["cross_size"]) == (r["rank"], 0, 1)
    want = [sum(k + r for r in range(np_)) for k in range(3)]
    assert all(r["sum"] == want for r in got)
    assert len({r["pid"] for r in got}) == np_  # one process per rank
    assert all(os.getpid() != r["pid"] for r in got)


def test_keras_training_in_spark_tasks_keeps_the_ranks_weights_identical(spark):
    pytest.importorskip("sklearn", reason="the digits data set ships in scikit-learn")
    got = run_bounded(spark, rank_fns.keras_digits, args=(3,), num_proc=2)
    assert [r[0] for r in got] == [0, 1]
    assert len({r[2] for r in got}) == 1, "the ranks' weights differ"
    assert all(r[1] > 0.8 for r in got), got  # it learned: about 0.9 after 3 epochs


def test_every_ranks_output_reaches_the_driver_prefixed_with_its_rank(spark, capfd):
    out = io.StringIO()
    got = run_bounded(spark, rank_fns.chatty, args=(3,), num_proc=2, stdout=out)
    assert got == [0, 1]
    lines = out.getvalue().splitlines()
    for rank in (0, 1):
        mine = [line for line in lines if line.startswith(f"[{rank}]<stdout>:")]
        assert mine == [f"[{rank}]<stdout>:hello {i} from rank {rank}" for i in range(3)]
    err = capfd.readouterr().err  # stderr=None: the driver's own stderr
    for rank in (0, 1):
        assert f"[{rank}]<stderr>:to stderr from rank {rank}" in err


def test_a_rank_that_raises_fails_the_run_naming_it_and_nothing_is_left_running(spark, tmp_path):
    start = time.monotonic()
    with pytest.raises(RankFailedError) as info:
        run_bounded(spark, rank_fns.fail_on_rank_1, args=(str(tmp_path), 120), num_proc=2)
    took = time.monotonic() - start
    e = info.value
    assert (e.rank, e.exc_type) == (1, "builtins.ValueError")
    assert "rank 1 of 2" in str(e) and "ValueError: boom on purpose from rank 1" in str(e)
    assert "fail_on_rank_1" in e.remote_traceback  # the rank's own traceback
    assert isinstance(e.__cause__, ValueError)
    assert took < 120, "rank 0 was not stopped when rank 1 failed"
    # Rank 0's process and the process it started are gone with the job.
    rank0, sleeper = (int(p) for p in (tmp_path / "pids").read_text().split())
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in (rank0, sleeper)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(rank0) and not _alive(sleeper)
    assert procs.wait_gone("horovod.spark.child", 15) == {}  # no rank of any task is left
    # The cluster is fine afterwards: no stage retry left behind, the next run works.
    assert run_bounded(spark, rank_fns.chatty, args=(0,), num_proc=2, stdout=io.StringIO()) == [
        0,
        1,
    ]


def test_a_rank_that_exits_without_a_result_is_named_with_its_exit_code(spark):
    with pytest.raises(RankFailedError, match=r"rank 1 of 2 .* exited with code 7") as info:
        run_bounded(spark, rank_fns.exit_on_rank_1, args=(7,), num_proc=2)
    assert (info.value.rank, info.value.exit_code) == (1, 7)


def test_an_unpicklable_result_is_named(spark):
    # Both ranks fail alike: either may be the one reported.
    with pytest.raises(
        RankFailedError, match=r"result of lock_result on rank [01] cannot be pickled"
    ):
        run_bounded(spark, rank_fns.lock_result, num_proc=2)


def test_more_ranks_than_task_slots_fail_at_once_naming_both(spark):
    start = time.monotonic()
    with pytest.raises(SparkSetupError, match=rf"num_proc={SLOTS + 1} but the cluster has {SLOTS}"):
        run_bounded(spark, rank_fns.chatty, args=(0,), num_proc=SLOTS + 1, limit=60)
    assert time.monotonic() - start < 30


def test_an_unpicklable_fn_is_named_before_anything_runs(spark):
    lock = threading.Lock()

    def holds_a_lock():
        return lock.locked()

    with pytest.raises(SparkSetupError, match=r"cannot pickle fn .*holds_a_lock"):
        horovod.spark.run(holds_a_lock, num_proc=2)


def _alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
