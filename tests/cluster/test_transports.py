"""Jobs started without mpirun across containers (issue 56): the engine's TCP transport between
real hosts of the compose network.

- `horovodrun --gloo` in the launcher: the ranks start over ssh with upstream Gloo's variables
  and the job's secret on stdin; the launcher serves the rendezvous; Keras trains to the same
  weights on every rank, as with mpirun.
- torchrun on each of two workers of the torch image (torchrun's static rendezvous at worker 1's
  address, as a Kubeflow Trainer or TorchDistributor starts workers): the unchanged PyTorch
  example trains across both, rank 0 serving Horovod's rendezvous at MASTER_PORT + 1.
"""

import re
import subprocess

from tests.support.compose import TAG, make_cluster

# Rank 0's report lines, behind horovodrun --gloo's "[rank]<stdout>:" prefix where there is one.
REPORT = re.compile(
    r"^(?:\[\d+\]<stdout>:)?rank (\d+) on (\S+): test accuracy ([0-9.]+), [0-9,]+ samples/s, "
    r"weights (\w+)$",
    re.M,
)


def test_gloo_trains_keras_across_containers(cluster):
    n = 2 * cluster.workers
    out, err = cluster.run_ok(
        f"horovodrun --gloo -np {n} python /opt/horovod/examples/tensorflow2_keras_digits.py "
        "--epochs 3",
        timeout=600,
    )
    rows = REPORT.findall(out)
    assert sorted(int(r) for r, *_ in rows) == list(range(n)), out + err
    assert len({h for _, h, _, _ in rows}) == cluster.workers, out
    assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{out}"
    assert float(rows[0][2]) > 0.8, out
    # No mpirun anywhere: the TCP transport ran, across every worker.
    assert re.search(
        rf"\[horovod summary\] {n} ranks on {cluster.workers} hosts over tcp,", out + err
    )
    for i in range(1, cluster.workers + 1):
        assert not cluster.processes(cluster.worker(i), "orted|keras_digits"), cluster.worker(i)


def test_torchrun_across_two_workers():
    c = make_cluster(2, env={"HOROVOD_IMAGE_TAG": f"{TAG}-torch"})
    try:
        master = c.address(c.worker(1))
        jobs = [
            subprocess.Popen(
                [
                    "docker",
                    "exec",
                    c.worker(node + 1),
                    "python",
                    "-m",
                    "torch.distributed.run",
                    "--nnodes",
                    "2",
                    "--node-rank",
                    str(node),
                    "--nproc-per-node",
                    "2",
                    "--rdzv-endpoint",
                    f"{master}:29500",
                    "/opt/horovod/examples/pytorch_classifier.py",
                    "--epochs",
                    "3",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for node in range(2)
        ]
        outs = [j.communicate(timeout=600) for j in jobs]
        out = "".join(o for o, _ in outs)
        err = "".join(e for _, e in outs)
        assert [j.returncode for j in jobs] == [0, 0], out + err
        rows = REPORT.findall(out)
        assert sorted(int(r) for r, *_ in rows) == [0, 1, 2, 3], out + err
        assert len({h for _, h, _, _ in rows}) == 2, out
        assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{out}"
        assert re.search(r"\[horovod summary\] 4 ranks on 2 hosts over tcp,", err), err
    finally:
        c.down()
