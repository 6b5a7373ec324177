"""The torch image on the compose cluster, through the knob every image goes through
(HOROVOD_IMAGE_TAG=<tag>-torch; `make cluster-up FRAMEWORK=torch` sets it): horovodrun finds the
workers and trains examples/pytorch_classifier.py across both, the ranks in sync; elastic torch
training (examples/pytorch_elastic.py) goes on through a worker added and one killed."""

import re
import subprocess

import pytest

from tests.support.compose import TAG, make_cluster


def test_torch_image_trains_across_the_cluster():
    c = make_cluster(2, env={"HOROVOD_IMAGE_TAG": f"{TAG}-torch"})
    try:
        out, err = c.run_ok(
            "horovodrun python /opt/horovod/examples/pytorch_classifier.py --epochs 3",
            timeout=600,
        )
        rows = re.findall(
            r"^rank (\d+) on (\S+): test accuracy ([0-9.]+), .* weights (\w+)$", out, re.M
        )
        assert sorted(int(r) for r, *_ in rows) == [0, 1, 2, 3], out + err
        assert len({h for _, h, _, _ in rows}) == 2, out
        assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{out}"
        assert float(rows[0][2]) > 0.6, out
    finally:
        c.down()


EPOCHS = 16
ELASTIC = (
    "horovodrun --min-np 2 --max-np 3 "
    "--host-discovery-script 'python -m horovod.runner.cluster --discover' "
    f"python /opt/horovod/examples/pytorch_elastic.py --epochs {EPOCHS} "
    # about 1.3 s an epoch on 2 ranks: the job outlasts a worker's start and discovery (~5 s)
    "--batch-sleep-ms 20"
)


@pytest.mark.alone
def test_torch_elastic_worker_added_then_killed():
    """Elastic torch training (TorchState, ElasticSampler) on the compose cluster, one job: a
    worker is added (generation 1 on 3 ranks, resumed from the commit), then killed (generation
    2 on the other 2); the job ends with rc 0, every epoch counted once and the same weights on
    every rank, nothing left running."""
    c = make_cluster(2, slots=1, env={"HOROVOD_IMAGE_TAG": f"{TAG}-torch"})
    try:
        job = c.start(ELASTIC)
        job.wait_for(r"^Epoch 3/", 180)
        c.compose("up", "-d", "--wait", "--scale", "worker=3", "--no-recreate")
        job.wait_for(r"generation 1: 3 rank\(s\)", 120)
        job.wait_for(r"^Epoch \d+/\d+ - 3 rank", 120)
        subprocess.run(["docker", "kill", c.worker(3)], check=True, capture_output=True, timeout=60)
        rc, _ = job.wait(300)
        out = job.output
        assert rc == 0, out[-6000:]
        assert re.search(rf"lost {c.worker(3)} \(", out), out[-6000:]
        assert "generation 2: 2 rank(s)" in out, out[-6000:]
        resumed = re.findall(r"resumed from commit \d+ \{'epoch': (\d+), 'batch': (\d+)\}", out)
        assert len(resumed) == 2 and int(resumed[0][0]) >= 2, out[-6000:]
        # every rank of generation 1, the new one too, ran the reset callback
        assert len(re.findall(r"reset: 3 rank\(s\), resuming at epoch \d+", out)) == 3, out
        done = re.findall(r"ELASTIC DONE rank=(\d+) size=(\d+) epoch=(\d+) \S+ weights=(\w+)", out)
        assert sorted(d[0] for d in done) == ["0", "1"], out[-6000:]
        assert {d[1] for d in done} == {"2"} and {d[2] for d in done} == {str(EPOCHS)}, done
        assert len({d[3] for d in done}) == 1, done  # identical final weights
        for w in (c.worker(1), c.worker(2)):
            assert not c.processes(w, "pytorch_elastic|orted"), w
    finally:
        c.down()
