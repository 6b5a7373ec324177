"""Jobs of known size for the end-of-job summary (HOROVOD_SUMMARY), run on every rank under
mpirun by test_summary.py (through scenarios.py); the summary itself is printed by rank 0's
engine at hvd.shutdown()."""

import time

import numpy as np

import horovod.numpy as hvd

MIB_FLOAT32 = (1 << 20) // 4  # elements of a 1 MiB float32 tensor


def sc_known_job():
    """10 allreduces of 1 MiB float32, a group of 4 x 1000 float64, a broadcast, an allgather."""
    r, n = hvd.rank(), hvd.size()
    for i in range(10):
        got = hvd.allreduce(np.full(MIB_FLOAT32, r + 1, np.float32), op=hvd.Sum, name=f"sum/{i}")
        assert (got == n * (n + 1) / 2).all(), got[:4]
    outs = hvd.grouped_allreduce(
        [np.full(1000, r + i, np.float64) for i in range(4)], op=hvd.Sum, name="sum/group"
    )
    for i, got in enumerate(outs):
        assert (got == n * i + n * (n - 1) / 2).all(), (i, got[:4])
    got = hvd.broadcast(np.full(10, r, np.int32), root_rank=0, name="sum/bcast")
    assert (got == 0).all(), got
    got = hvd.allgather(np.full((2, 3), r, np.float64), name="sum/gather")
    assert got.shape == (2 * n, 3) and (got[::2, 0] == np.arange(n)).all(), got


def sc_straggler():
    """Rank 1 computes longer before every step: the others wait for it in each allreduce."""
    r, n = hvd.rank(), hvd.size()
    for i in range(10):
        if r == 1:
            time.sleep(0.2)
        got = hvd.allreduce(np.ones(1000, np.float32), op=hvd.Sum, name=f"step/{i}")
        assert (got == n).all(), got[:4]
