"""Elastic training on a real compose cluster (issue 18): horovodrun in the launcher with the
compose discovery (`python -m horovod.runner.cluster --discover`) runs the elastic Keras example;
a worker is added with `docker compose up --scale`, then one is killed. Each time the job must
finish with rc 0 on the ranks it has then, with identical weights on every rank, the epoch count
exact, and nothing left running. One cluster (1 slot per worker) serves both, in order."""

import re
import subprocess

import pytest

from tests.support.compose import TIMINGS, make_cluster

pytestmark = pytest.mark.alone

EPOCHS = 30
ELASTIC = (
    "horovodrun --min-np 2 --max-np 3 "
    "--host-discovery-script 'python -m horovod.runner.cluster --discover' "
    f"python /opt/horovod/examples/tensorflow2_keras_digits_elastic.py --epochs {EPOCHS} "
    # At least 0.5 s an epoch: the job must outlast a worker's start and discovery (~5 s) however
    # fast the engine gets (30 epochs took 3 s in all once idle rounds were rarer).
    "--batch-sleep-ms 20"
)


@pytest.fixture(scope="module")
def elastic_cluster():
    c = make_cluster(2, slots=1)
    yield c
    c.down()


def finished(job, ranks):
    """The DONE lines: `ranks` of them, every rank at the last epoch with the same weights."""
    done = re.findall(
        r"ELASTIC DONE rank=(\d+) size=(\d+) epoch=(\d+) \S+ weights=(\w+)", job.output
    )
    assert len(done) == ranks, job.output[-6000:]
    assert {d[1] for d in done} == {str(ranks)}, done
    assert {d[2] for d in done} == {str(EPOCHS)}, done  # every epoch counted exactly once
    assert len({d[3] for d in done}) == 1, done  # identical final weights


def nothing_left(c, containers):
    for w in containers:
        assert not c.processes(w, "digits_elastic|orted"), w


def test_added_worker_joins_from_the_commit(elastic_cluster):
    c = elastic_cluster
    job = c.start(ELASTIC)
    job.wait_for(r"^Epoch 4/", 180)
    c.compose("up", "-d", "--wait", "--scale", "worker=3", "--no-recreate")
    rc, seconds = job.wait(300)
    assert rc == 0, job.output[-6000:]
    assert "generation 1: 3 rank(s)" in job.output, job.output[-6000:]
    m = re.search(r"resumed from commit \d+ \{'epoch': (\d+), 'batch': (\d+)\}", job.output)
    assert m and int(m.group(1)) >= 3, job.output[-6000:]
    # every rank, the new one too, ran the reset callback at the committed epoch
    assert len(re.findall(rf"reset: 3 rank\(s\), resuming at epoch {m.group(1)}", job.output)) == 3
    finished(job, 3)
    nothing_left(c, [c.worker(i) for i in (1, 2, 3)])


def test_killed_worker_job_goes_on_with_the_rest(elastic_cluster):
    c = elastic_cluster
    job = c.start(ELASTIC)
    job.wait_for(r"^Epoch 4/", 180)
    subprocess.run(["docker", "kill", c.worker(3)], check=True, capture_output=True, timeout=60)
    rc, seconds = job.wait(300)
    assert rc == 0, job.output[-6000:]
    assert re.search(rf"lost {c.worker(3)} \(", job.output), job.output[-6000:]
    assert "generation 1: 2 rank(s)" in job.output, job.output[-6000:]
    assert "resumed from commit" in job.output
    finished(job, 2)
    m = re.search(r"generation 0 ended after [\d.]+ s", job.output)
    TIMINGS.append(("elastic: job with a killed worker took", seconds))
    assert m
    nothing_left(c, [c.worker(1), c.worker(2)])


def test_paused_worker_is_dropped_after_the_stall_bound(elastic_cluster):
    """A paused worker stalls the collectives: the survivors' stall check ends the generation,
    the driver's ssh check finds the host silent and blacklists it, and the job finishes on the
    worker left (--min-np 1)."""
    c = elastic_cluster
    stall = "HOROVOD_STALL_CHECK_TIME_SECONDS=2 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=8"
    job = c.start(f"{stall} {ELASTIC.replace('--min-np 2', '--min-np 1')}")
    job.wait_for(r"^Epoch 4/", 180)
    subprocess.run(["docker", "pause", c.worker(2)], check=True, capture_output=True, timeout=60)
    try:
        rc, seconds = job.wait(300)
    finally:
        subprocess.run(["docker", "unpause", c.worker(2)], capture_output=True, timeout=60)
    TIMINGS.append(("elastic: job with a paused worker took", seconds))
    assert rc == 0, job.output[-6000:]
    assert re.search(rf"lost {c.worker(2)} \(", job.output), job.output[-6000:]
    assert "generation 1: 1 rank(s)" in job.output, job.output[-6000:]
    finished(job, 1)
    nothing_left(c, [c.worker(1)])
