"""horovod.ray.RayExecutor on a real local Ray (`ray.init(num_cpus=4)`, tests/ray/conftest.py):
results in rank order with each rank's view and an allreduce, two runs in one engine, the
executable and execute/execute_single/run_remote, a rank that raises, a rank that shuts its
engine down, too many workers, calls out of order, and nothing left after shutdown(). Every
call is bounded (conftest.bounded) so that a hang fails the test."""

import os
import time

import pytest

from tests.ray import rank_fns
from tests.ray.conftest import bounded, live_groups, wait_gone

ray = pytest.importorskip("ray", reason="horovod.ray's tests need ray (install-prereqs.sh)")
from horovod.ray import (  # noqa: E402  (after the skip: horovod.ray needs ray at call time)
    PlacementTimeoutError,
    RayExecutor,
    RayExecutorStateError,
    WorkerFailedError,
)

# Ranks meet within this (the actors import numpy and the engine first; slow under load).
SETTINGS = dict(timeout_s=120, placement_group_timeout_s=60)


@pytest.fixture
def executor(ray_local, request):
    """A started RayExecutor of `request.param` workers (2 by default), shut down after."""
    size = getattr(request, "param", 2)
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_workers=size)
    bounded(ex.start)
    try:
        yield ex
    finally:
        bounded(ex.shutdown)


def worker_pids(ex):
    return [slot.pid for slot in ex._slots]


@pytest.mark.parametrize("executor", [2, 3], indirect=True)
def test_results_in_rank_order_with_each_ranks_view_and_an_allreduce(executor):
    size = executor.size
    got = bounded(executor.run, rank_fns.rank_view, args=["x"])
    assert [r["rank"] for r in got] == list(range(size))
    want = [sum(k + r for r in range(size)) for k in range(3)]
    for r in got:
        # One Ray node: every rank on it, one local group, one cross rank.
        assert (r["tag"], r["size"], r["transport"], r["sum"]) == ("x", size, "tcp", want)
        assert (r["local_rank"], r["local_size"]) == (r["rank"], size)
        assert (r["cross_rank"], r["cross_size"], r["env_rank"]) == (0, 1, r["rank"])
    assert len({r["pid"] for r in got}) == size and os.getpid() not in {r["pid"] for r in got}
    assert [r["pid"] for r in got] == worker_pids(executor)


def test_two_runs_in_a_row_share_the_actors_and_their_engine(executor):
    first = bounded(executor.run, rank_fns.rank_view, kwargs={"tag": "one"})
    second = bounded(executor.run, rank_fns.rank_view, kwargs={"tag": "two"})
    assert [r["pid"] for r in first] == [r["pid"] for r in second]  # same processes
    assert [r["sum"] for r in second] == [[1.0, 3.0, 5.0]] * 2
    assert [r["tag"] for r in second] == ["two", "two"]


def test_executable_execute_single_and_run_remote(ray_local):
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_workers=2)
    bounded(
        ex.start, executable_cls=rank_fns.Counter, executable_args=[10],
        executable_kwargs={"step": 5}, extra_env_vars={"RAY_TEST_MARK": "m1"},
    )  # fmt: skip
    try:
        assert bounded(ex.execute, lambda w: w.bump()) == [15, 15]
        assert bounded(ex.execute_single, lambda w: w.bump()) == 20  # rank 0 only
        assert bounded(ex.execute, lambda w: w.value) == [20, 15]
        marks = bounded(ex.run, lambda: (os.environ["RAY_TEST_MARK"], os.environ["HOROVOD_RANK"]))
        assert marks == [("m1", "0"), ("m1", "1")]
        refs = bounded(ex.run_remote, rank_fns.rank_view, args=["remote"])
        assert len(refs) == 2
        got = bounded(ray.get, refs, timeout=120)
        assert [(r["rank"], r["tag"]) for r in got] == [(0, "remote"), (1, "remote")]
    finally:
        bounded(ex.shutdown)


def test_fn_raising_on_one_rank_names_it_and_the_others_do_not_hang(executor):
    before = worker_pids(executor)
    started = time.monotonic()
    with pytest.raises(WorkerFailedError) as info:
        bounded(executor.run, rank_fns.raise_on_rank, args=[1])
    took = time.monotonic() - started
    err = info.value
    assert (err.rank, err.exc_type) == (1, "builtins.ValueError")
    assert err.node_id == executor._slots[1].node_id
    text = str(err)
    assert "rank 1 of 2" in text and err.node_id in text and executor._slots[1].label in text
    assert "fn failed on purpose on rank 1" in text
    assert "in fail_here" in err.remote_traceback and "Traceback on rank 1" in text
    assert isinstance(err.__cause__, ValueError)
    # Rank 0 was in an allreduce: the failed rank's engine shut down and ended it at once,
    # long before the grace period after which a rank is killed.
    assert took < 60, took
    # The executor goes on with fresh workers: the old processes are gone.
    got = bounded(executor.run, rank_fns.rank_view, args=["after"])
    assert [r["rank"] for r in got] == [0, 1]
    assert not set(r["pid"] for r in got) & set(before)
    assert wait_gone(before) == []


def test_fn_shutting_its_engine_down_gets_fresh_workers_next_time(executor):
    first = bounded(executor.run, rank_fns.init_and_shutdown)
    second = bounded(executor.run, rank_fns.init_and_shutdown)
    assert [r for r, _ in first] == [r for r, _ in second] == [0, 1]
    assert not {p for _, p in first} & {p for _, p in second}


def test_more_workers_than_the_cluster_has_fails_after_the_placement_timeout(ray_local):
    groups_before = len(live_groups(ray_local))
    settings = RayExecutor.create_settings(timeout_s=30, placement_group_timeout_s=3)
    ex = RayExecutor(settings, num_workers=5, cpus_per_worker=1)
    started = time.monotonic()
    with pytest.raises(PlacementTimeoutError) as info:
        bounded(ex.start, limit=120)
    assert 3 <= time.monotonic() - started < 100
    text = str(info.value)
    assert "5 bundle(s) of CPU 1" in text and "within 3 s" in text
    assert "whole cluster: CPU 4" in text and "free now: CPU" in text
    assert len(info.value.requested) == 5
    assert len(live_groups(ray_local)) == groups_before  # the group was removed again
    with pytest.raises(RayExecutorStateError, match="before start"):
        ex.run(rank_fns.rank_view, args=["x"])


def test_calls_before_start_and_after_shutdown_are_refused(ray_local):
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_workers=2)
    for call in (lambda: ex.run(rank_fns.rank_view), lambda: ex.execute(lambda w: w),
                 lambda: ex.execute_single(lambda w: w), lambda: ex.run_remote(print)):  # fmt: skip
        with pytest.raises(RayExecutorStateError, match=r"before start\(\): call start\(\) first"):
            call()
    bounded(ex.start)
    bounded(ex.shutdown)
    with pytest.raises(RayExecutorStateError, match=r"after shutdown\(\)"):
        ex.run(rank_fns.rank_view)
    ex.shutdown()  # idempotent


def test_shutdown_leaves_no_actor_process_nor_placement_group(ray_local):
    groups_before = len(live_groups(ray_local))
    ex = RayExecutor(RayExecutor.create_settings(**SETTINGS), num_workers=3)
    bounded(ex.start)
    bounded(ex.run, rank_fns.rank_view, args=["x"])
    pids = worker_pids(ex)
    assert len(live_groups(ray_local)) == groups_before + 1
    bounded(ex.shutdown)
    assert wait_gone(pids) == []
    assert len(live_groups(ray_local)) == groups_before


def test_bad_arguments_are_refused_before_anything_starts():
    settings = RayExecutor.create_settings()
    with pytest.raises(ValueError, match="Both `min_workers` and `num_workers` provided"):
        RayExecutor(settings, min_workers=1, num_workers=2)
    with pytest.raises(ValueError, match="max_workers without min_workers"):
        RayExecutor(settings, max_workers=2)
    with pytest.raises(ValueError, match="min_workers must be a positive integer, not 0"):
        RayExecutor(settings, min_workers=0)
    with pytest.raises(ValueError, match=r"max_workers must be an integer >= min_workers \(2\)"):
        RayExecutor(settings, min_workers=2, max_workers=1)
    with pytest.raises(ValueError, match="cooldown_range must be"):
        RayExecutor(settings, min_workers=1, cooldown_range=(5, 1))
    with pytest.raises(ValueError, match="num_workers or num_hosts, not both"):
        RayExecutor(settings, num_workers=2, num_hosts=2)
    with pytest.raises(ValueError, match="give num_workers, or num_hosts"):
        RayExecutor(settings)
    with pytest.raises(ValueError, match="num_workers must be a positive integer"):
        RayExecutor(settings, num_workers=0)
    with pytest.raises(ValueError, match="give one network interface"):
        RayExecutor(RayExecutor.create_settings(nics={"eth0", "eth1"}), num_workers=2)
    with pytest.raises(TypeError, match="unexpected keyword"):
        RayExecutor(settings, num_workers=2, workers=3)


def test_keras_training_keeps_the_ranks_weights_identical(executor):
    pytest.importorskip("tensorflow")
    got = bounded(executor.run, rank_fns.keras_train, args=[2], limit=400)
    assert [rank for rank, _ in got] == [0, 1]
    assert got[0][1] == got[1][1]
