"""horovod.torch re-forming in process (docs/elastic.md, "Over TCP: in process"): horovodrun
--gloo's elastic mode on this host runs elastic_gloo_job.py (DistributedOptimizer, TorchState)
on 3 ranks and SIGKILLs rank 2 after a commit; ranks 0 and 1 re-form in their own processes,
resume from the commit in memory and finish with the weights plain SGD reaches on one process."""

import os
import re
import signal
import subprocess
import sys
import time

import torch

from tests.support.mpi import environment
from tests.support.paths import ROOT

JOB = str(ROOT / "tests" / "torch" / "elastic_gloo_job.py")
STEPS = 40


def reference_weights():
    """Plain SGD on one process over the job's batches (elastic_gloo_job.batch)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(8, 4, generator=g)
        y = x.sum(dim=1, keepdim=True) * 0.5 + 1.0
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return torch.cat([q.detach().flatten() for q in model.parameters()])


def wait_for(path, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "horovodrun ended before the rank wrote its pid"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_killed_rank_survivors_reform_and_train_on(tmp_path):
    (tmp_path / "hosts").write_text("localhost:3\n")
    cmd = [sys.executable, "-m", "horovod.runner.launch", "--gloo", "--min-np", "2"]
    cmd += ["--host-discovery-script", f"cat {tmp_path / 'hosts'}", sys.executable, JOB]
    cmd += ["--steps", str(STEPS), "--pid-dir", str(tmp_path)]
    env = environment({"OMP_NUM_THREADS": "1", "HOROVOD_ELASTIC_STORE": str(tmp_path / "store")})
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(tmp_path / "g0-r2.pid", proc)
        while not list((tmp_path / "store").glob("*/*.commit")):  # a commit to resume from
            assert proc.poll() is None, "horovodrun ended before the first commit"
            time.sleep(0.05)
        (tmp_path / "hosts").write_text("localhost:2\n")
        os.kill(int((tmp_path / "g0-r2.pid").read_text()), signal.SIGKILL)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "generation 1: 2 rank(s)" in out and "re-forming in this process" in out, out
    done = re.findall(r"DONE rank=(\d) size=(\d) step=(\d+) pid=(\d+) weights=(\S+)", out)
    assert sorted(d[0] for d in done) == ["0", "1"], out
    for rank, size, step, pid, weights in done:
        assert size == "2" and step == str(STEPS), out
        assert pid == (tmp_path / f"g0-r{rank}.pid").read_text(), "a new process, not a survivor"
        got = torch.tensor([float(v) for v in weights.split(",")])
        assert torch.allclose(got, reference_weights(), atol=1e-5), (got, reference_weights())
