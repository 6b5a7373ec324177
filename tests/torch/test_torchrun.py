"""torchrun starts the ranks, not mpirun (issue 56): the unchanged examples/pytorch_classifier.py
under torchrun forms its job over the engine's TCP transport from torchrun's RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT (rendezvous at MASTER_PORT + 1, hosted by rank 0), and trains to the
same weights on every rank. Two torchrun agents joined by torchrun's own c10d rendezvous stand
for two nodes (the cluster suite runs them across containers)."""

import os
import re
import subprocess
import sys

import pytest

from tests.support.mpi import environment
from tests.support.paths import ROOT
from tests.support.tcp import free_port

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
EXAMPLE = str(ROOT / "examples" / "pytorch_classifier.py")


def check_trained(out, err, ranks):
    assert "Test accuracy" in out and "(all ranks' weights identical)" in out, out + err
    assert len(re.findall(r"^rank \d+ on ", out, re.M)) == ranks, out
    # The engine chose TCP by itself (no HOROVOD_TRANSPORT given): the summary says so.
    assert re.search(rf"\[horovod summary\] {ranks} ranks on 1 host over tcp,", err), err


def run(cmd, timeout=240):
    env = environment({"OMP_NUM_THREADS": "1"})
    env.pop("HOROVOD_TRANSPORT", None)
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("nproc", [2, 3])
def test_torchrun_one_machine(nproc):
    rc, out, err = run(
        TORCHRUN
        + [
            "--nproc-per-node",
            str(nproc),
            "--master-port",
            str(free_port(pair=True)),
            EXAMPLE,
            "--epochs",
            "2",
        ]
    )
    assert rc == 0, out + err
    check_trained(out, err, nproc)


def test_torchrun_two_agents_over_c10d():
    """`torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint ...` twice:
    torchrun's agents meet first, then its four workers meet in Horovod's rendezvous."""
    port = free_port(pair=True)
    base = TORCHRUN + [
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        f"hvd-{os.getpid()}",
    ]
    env = environment({"OMP_NUM_THREADS": "1"})
    env.pop("HOROVOD_TRANSPORT", None)
    procs = [
        subprocess.Popen(
            base + [EXAMPLE, "--epochs", "2"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=240))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), outs
    out = "".join(o for o, _ in outs)
    err = "".join(e for _, e in outs)
    check_trained(out, err, 4)
