"""horovod.spark.run on a real Spark standalone cluster on compose (compose/compose.spark.yaml:
a master, two workers of 2 task slots, a driver container; the spark image): 4 ranks across
both workers with their local and cross ranks; a rank that raises (the driver's error names it
with its traceback, and no rank process is left in any worker); a worker container killed
mid-job (run() fails within a bound naming a lost rank and its host). The driver runs
tests/cluster/jobs/spark_job.py. One cluster for the module (the kill test, last, breaks it)."""

import json
import re
import subprocess
import time

import pytest

from tests.support.compose import TAG, TIMINGS
from tests.support.spark_compose import make_spark_cluster

RANK_PROCESS = "horovod.spark.child"  # a rank: python -m horovod.spark.child WORKDIR
# A driver program: session start, executors, the scenarios; minutes on a loaded 2-core machine.
DRIVER_SECONDS = 240
# From a worker's death to run()'s error: the relay sees the task's connection end at once.
LOST_BOUND_SECONDS = 30


@pytest.fixture(scope="module")
def spark():
    if TAG.endswith("-gpu"):
        pytest.skip(f"IMAGE_TAG={TAG}: the spark layer is in the CPU flavour only (images/layers)")
    c = make_spark_cluster(workers=2, cores=2)
    TIMINGS.append(("spark cluster up (2 workers registered)", c.up_seconds))
    yield c
    c.down()


def scenarios(out):
    """{name: outcome} from the driver's `SCENARIO <name> <json>` lines."""
    found = re.findall(r"^SCENARIO (\w+) (.*)$", out, re.M)
    return {name: json.loads(text) for name, text in found}


def rank_processes(c, workers):
    """{worker: [command lines]} of rank processes left in the workers, after up to 15 s."""
    deadline = time.monotonic() + 15
    while True:
        left = {w: c.processes(w, RANK_PROCESS) for w in workers}
        left = {w: p for w, p in left.items() if p}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


@pytest.fixture(scope="module")
def placement_and_raise(spark):
    """One driver program for both scenarios (a Spark application's start is most of the time)."""
    start = time.monotonic()
    out, err = spark.run_ok("python /jobs/spark_job.py placement raise 2>&1", DRIVER_SECONDS)
    TIMINGS.append(("spark driver: session, placement, raise", time.monotonic() - start))
    got = scenarios(out)
    assert set(got) == {"placement", "raise"}, out
    return got, out


def test_ranks_across_both_workers_with_local_and_cross_ranks(spark, placement_and_raise):
    got = placement_and_raise[0]["placement"]
    assert "result" in got, got
    ranks = got["result"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    workers = {spark.address(spark.worker(i)) for i in (1, 2)}
    by_host = {}
    for r in ranks:
        by_host.setdefault(r["horovod_hostname"], []).append(r)
    assert set(by_host) == workers, ranks  # the executors' addresses: both workers
    # 2 ranks per worker, consecutive, local ranks 0 and 1; cross rank: the host's place.
    for cross, rs in enumerate(by_host.values()):
        assert [r["local_rank"] for r in rs] == [0, 1] and {r["local_size"] for r in rs} == {2}
        assert rs[1]["rank"] == rs[0]["rank"] + 1
        assert [(r["cross_rank"], r["cross_size"]) for r in rs] == [(cross, 2)] * 2
        assert len({r["hostname"] for r in rs}) == 1  # one container
    assert all(r["sum"] == [10.0, 10.0] for r in ranks)
    assert got["seconds"] < 60, got


def test_a_rank_that_raises_is_named_with_its_traceback_and_nothing_is_left(
    spark, placement_and_raise
):
    got, out = placement_and_raise
    failed = got["raise"]
    assert failed.get("error") == "RankFailedError", failed
    text = failed["text"]
    assert failed["rank"] == 2 and "rank 2 of 4" in text, text
    assert "builtins.ValueError: boom on purpose from rank 2" in text, text
    assert "Traceback on rank 2" in text and "in fail_on_rank_2" in text, text
    assert failed["host"] in {spark.address(spark.worker(i)) for i in (1, 2)}, failed
    assert failed["seconds"] < 60, failed  # the others were stopped, not left to a timeout
    left = rank_processes(spark, [spark.worker(1), spark.worker(2)])
    assert not left, f"rank processes left after the job: {left}"


def test_a_killed_worker_fails_the_run_naming_a_lost_rank_and_its_host(spark, placement_and_raise):
    """Last in the module: it leaves the cluster with one worker."""
    victim = spark.worker(2)
    victim_address = spark.address(victim)
    job = spark.start("python /jobs/spark_job.py steps 2>&1")
    job.wait_for(r"^\[0\]<stdout>:step 20$", DRIVER_SECONDS)
    p = subprocess.run(["docker", "kill", victim], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    killed = time.monotonic()
    job.wait_for(r"^SCENARIO steps ", LOST_BOUND_SECONDS + 30)
    seconds = time.monotonic() - killed
    TIMINGS.append(("spark worker killed: run() raised after", seconds))
    failed = scenarios(job.output)["steps"]
    assert failed.get("error") == "RankFailedError", job.output
    lost = rf"rank ([0-3]) of 4 \(host {re.escape(victim_address)}\) was lost"
    assert re.search(lost, failed["text"]), failed["text"]
    assert failed["host"] == victim_address, failed
    assert seconds < LOST_BOUND_SECONDS, f"{seconds:.1f} s: {failed}"
    job.wait(60)
    left = rank_processes(spark, [spark.worker(1)])
    assert not left, f"rank processes left on the surviving worker: {left}"
