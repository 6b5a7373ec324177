"""The elastic RayExecutor (min_workers/max_workers, upstream's elastic_v2) on a
`ray.cluster_utils.Cluster` of Ray nodes on this machine: a head without CPUs, a node of 2 CPUs
for the whole module, and nodes of 1 CPU added and removed by the tests. The job
(rank_fns.elastic_count) adds the world's size to an ObjectState each step and commits; each
step is logged with its generation, so the tests see when training went on and at what size.
Every call is bounded (conftest.bounded)."""

import concurrent.futures
import glob
import os
import time

import pytest

from tests.ray import rank_fns
from tests.ray.conftest import bounded, ray_nodes, wait_gone

ray = pytest.importorskip("ray", reason="horovod.ray's tests need ray (install-prereqs.sh)")
from horovod.ray import (  # noqa: E402
    RayExecutor,
    RayExecutorStateError,
    ResetLimitError,
    TooFewWorkersError,
    WorkerFailedError,
)
from horovod.ray.elastic import STORE_ROOT  # noqa: E402

SETTINGS = dict(timeout_s=120, placement_group_timeout_s=60)
LIMIT = 150  # one elastic run, its resets included


@pytest.fixture(scope="module")
def cluster():
    with ray_nodes(dict(num_cpus=2)) as nodes:
        yield nodes


@pytest.fixture
def extra_node(cluster):
    """A node of 1 CPU added for the test (removed after it if still there)."""
    node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield node
    if node in cluster.worker_nodes:
        cluster.remove_node(node)


def steps_of(log_dir):
    """[(time, generation, rank, size, step, pid)] logged so far."""
    try:
        with open(log_dir / "steps.log") as f:
            rows = [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [(float(t), int(g), int(r), int(s), int(n), int(p)) for t, g, r, s, n, p in rows]


def run_with(ex, log_dir, steps, at_step, action, fn=rank_fns.elastic_count, **kwargs):
    """ex.run(fn(steps, log_dir)) in a thread; action() here (Ray's Cluster adds nodes from the main
    thread only) once a rank logged step `at_step`. The run's results, or its error raised."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(ex.run, fn, args=[steps, str(log_dir)], **kwargs)
        deadline = time.monotonic() + 120
        while not future.done() and time.monotonic() < deadline:
            if any(row[4] >= at_step for row in steps_of(log_dir)):
                action()
                break
            time.sleep(0.1)
        try:
            return future.result(timeout=LIMIT)
        except concurrent.futures.TimeoutError:
            bounded(ex.shutdown)
            pytest.fail(f"the elastic run did not end within {LIMIT} s")


def elastic(**kwargs):
    settings = RayExecutor.create_settings(**SETTINGS)
    return RayExecutor(settings, **{"min_workers": 1, "max_workers": 4, **kwargs})


def check_consistent(results, steps):
    """Every rank ends with the same state: all steps done, total = the sizes it summed."""
    states = [state for _, _, state in results]
    assert all(state == states[0] for state in states)
    assert states[0]["step"] == steps and len(states[0]["sizes"]) == steps
    assert states[0]["total"] == sum(states[0]["sizes"])
    return states[0]["sizes"]


def check_nothing_left(log_dir):
    assert wait_gone({row[5] for row in steps_of(log_dir)}) == []
    assert glob.glob(f"{STORE_ROOT}/*/*") == []  # the commit files were removed


def test_node_removed_training_goes_on_from_the_last_commit_with_fewer_workers(
    cluster, extra_node, tmp_path
):
    ex = elastic()
    bounded(ex.start)
    removed = {}

    def remove():
        removed["at"] = time.time()
        cluster.remove_node(extra_node)

    try:
        results = run_with(ex, tmp_path, 20, 6, remove)
    finally:
        bounded(ex.shutdown)
    assert [(rank, size) for rank, size, _ in results] == [(0, 2), (1, 2)]
    sizes = check_consistent(results, 20)
    # The steps of 3 workers, then those of 2 (from the last commit on: none counted twice).
    cut = sizes.index(2)
    assert cut >= 6 and set(sizes[:cut]) == {3} and set(sizes[cut:]) == {2}
    rows = steps_of(tmp_path)
    resumed = min(t for t, g, *_ in rows if g > 0)
    print(f"\nelastic: node removed -> training again in {resumed - removed['at']:.2f} s")
    assert 0 < resumed - removed["at"] < 60
    check_nothing_left(tmp_path)


def test_node_added_is_used_at_the_next_reset(cluster, tmp_path):
    ex = elastic()
    bounded(ex.start)
    added = []
    try:
        # add_node takes seconds: 40 steps leave the job time to see the node.
        results = run_with(ex, tmp_path, 40, 3, lambda: added.append(cluster.add_node(num_cpus=1)))
    finally:
        bounded(ex.shutdown)
        for node in added:
            cluster.remove_node(node)
    assert [(rank, size) for rank, size, _ in results] == [(0, 3), (1, 3), (2, 3)]
    sizes = check_consistent(results, 40)
    cut = sizes.index(3)
    assert cut >= 3 and set(sizes[:cut]) == {2} and set(sizes[cut:]) == {3}
    assert {g for _, g, *_ in steps_of(tmp_path)} == {0, 1}  # one reset: at the commit after
    check_nothing_left(tmp_path)


def test_reset_limit_ends_the_job_saying_so(cluster, extra_node, tmp_path):
    ex = elastic(reset_limit=0)
    bounded(ex.start)
    try:
        with pytest.raises(ResetLimitError, match=r"reset 1 is over reset_limit=0; ending the job"):
            run_with(ex, tmp_path, 40, 3, lambda: cluster.remove_node(extra_node))
    finally:
        bounded(ex.shutdown)
    check_nothing_left(tmp_path)


def test_fns_own_error_ends_the_job_naming_the_rank(cluster, tmp_path):
    ex = elastic()
    bounded(ex.start)
    try:
        with pytest.raises(WorkerFailedError, match=r"rank 1 of 2 .* raised builtins.ValueError"):
            bounded(ex.run, rank_fns.elastic_count, args=[10, str(tmp_path)],
                    kwargs={"fail_at": (1, 3)}, limit=LIMIT)  # fmt: skip
    finally:
        bounded(ex.shutdown)
    check_nothing_left(tmp_path)


def test_a_peers_error_with_no_peer_lost_ends_the_job_instead_of_a_reset(cluster):
    ex = elastic(max_workers=2)
    bounded(ex.start)
    try:
        with pytest.raises(WorkerFailedError, match=r"HorovodInternalError: rank \d: a peer's"):
            bounded(ex.run, rank_fns.internal_error_outside_elastic_run, limit=LIMIT)
    finally:
        bounded(ex.shutdown)


def test_too_few_workers_within_elastic_timeout_is_a_clear_error(cluster):
    ex = elastic(min_workers=5, max_workers=None, elastic_timeout=2)
    started = time.monotonic()
    with pytest.raises(TooFewWorkersError) as info:
        bounded(ex.start, limit=60)
    assert 2 <= time.monotonic() - started < 30
    text = str(info.value)
    assert "needed 5 worker(s) (min_workers) of 1 CPU each" in text
    assert "for 2 s (elastic_timeout) Ray's nodes could hold 2" in text
    with pytest.raises(RayExecutorStateError, match=r"after shutdown\(\)"):
        ex.run(rank_fns.rank_view)


def test_calls_out_of_order_and_static_only_calls_are_refused(cluster):
    ex = elastic()
    with pytest.raises(RayExecutorStateError, match=r"before start\(\)"):
        ex.run(rank_fns.rank_view)
    with pytest.raises(NotImplementedError, match="run_remote"):
        ex.run_remote(rank_fns.rank_view)
    with pytest.raises(NotImplementedError, match="execute_single"):
        ex.execute_single(lambda w: w)


def test_keras_state_survives_a_node_removed(cluster, extra_node, tmp_path):
    pytest.importorskip("tensorflow")
    ex = elastic()
    bounded(ex.start)
    removed = {}

    def remove():
        removed["at"] = time.time()
        cluster.remove_node(extra_node)

    try:
        results = run_with(ex, tmp_path, 24, 4, remove, fn=rank_fns.keras_elastic)
    finally:
        bounded(ex.shutdown)
    resumed = min(t for t, g, *_ in steps_of(tmp_path) if g > 0)
    print(f"\nelastic Keras: node removed -> training again in {resumed - removed['at']:.2f} s")
    assert [(rank, size, step) for rank, size, step, _ in results] == [(0, 2, 24), (1, 2, 24)]
    assert results[0][3] == results[1][3]  # the same weights on every rank
    assert {row[1] for row in steps_of(tmp_path)} == {0, 1}
    check_nothing_left(tmp_path)


def test_actor_killed_its_node_blacklisted_for_the_cooldown_then_used_again(
    cluster, extra_node, tmp_path
):
    ex = elastic(cooldown_range=(2, 2))

    def kill_the_extra_nodes_worker():
        generation = ex._elastic._generation
        rank = [s.node_id for s in generation.slots].index(extra_node.node_id)
        ray.kill(generation.workers[rank])

    bounded(ex.start)
    try:
        results = run_with(ex, tmp_path, 40, 4, kill_the_extra_nodes_worker)
    finally:
        bounded(ex.shutdown)
    assert [(rank, size) for rank, size, _ in results] == [(0, 3), (1, 3), (2, 3)]
    sizes = check_consistent(results, 40)
    # 3 workers, 2 while the node is blacklisted, 3 again once its cooldown passed.
    runs = [size for i, size in enumerate(sizes) if i == 0 or sizes[i - 1] != size]
    assert runs == [3, 2, 3]
    assert {row[1] for row in steps_of(tmp_path)} == {0, 1, 2}
    check_nothing_left(tmp_path)


def test_execute_runs_fn_on_the_executable_of_each_worker(cluster):
    ex = elastic(max_workers=2)
    bounded(ex.start, executable_cls=rank_fns.Counter, executable_args=[5],
            extra_env_vars={"RAY_TEST_MARK": "m"})  # fmt: skip
    try:
        got = bounded(ex.execute, lambda counter: (counter.bump(), os.environ["RAY_TEST_MARK"]))
    finally:
        bounded(ex.shutdown)
    assert got == [(6, "m"), (6, "m")]
