"""A training-like loop for HOROVOD_AUTOTUNE (test_autotune.py): the autotuner switches the fusion
threshold and cycle time under it, and every result is checked against NumPy.

Each step reduces a group whose tensors (0.25 to 1.75 MiB) are fused differently under each
threshold the autotuner tries (0, 1, 4, 16 MiB, ...), one tensor alone, and every few steps a
broadcast and an allgather. The fast path fuses cached responses on each rank by itself: had
ranks switched thresholds in different rounds, their fused buffers would differ in size and the
collective would fail, hang or give wrong sums.
"""

import sys

import numpy as np

import horovod.numpy as hvd

GROUP_MIB = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]  # 7 MiB per step in all


def _check(got, want, what):
    assert got.shape == want.shape and np.array_equal(got, want), (
        what,
        got.ravel()[:4],
        want.ravel()[:4],
    )


def sc_autotune_steps():
    """ARGS: the number of steps."""
    steps = int(sys.argv[2])
    r, n = hvd.rank(), hvd.size()
    for step in range(steps):
        # Small integers in float32: every sum is exact, so results compare with ==.
        xs = [
            np.full(int(mib * (1 << 18)), (r + 1) * (k + 1) + step % 7, np.float32)
            for k, mib in enumerate(GROUP_MIB)
        ]
        outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="at/grads")
        for k, got in enumerate(outs):
            want = sum((q + 1) * (k + 1) + step % 7 for q in range(n))
            _check(got, np.full_like(xs[k], want), f"step {step} group member {k}")
        single = np.arange(5000, dtype=np.float64) * (r + 1) + step
        got = hvd.allreduce(single, op=hvd.Average, name="at/single")
        want = np.arange(5000, dtype=np.float64) * (n + 1) / 2 + step
        assert np.allclose(got, want), (step, got[:4], want[:4])
        if step % 5 == 0:
            got = hvd.broadcast(np.full(100, r + step, np.int32), root_rank=n - 1, name="at/bcast")
            _check(got, np.full(100, n - 1 + step, np.int32), f"step {step} broadcast")
            got = hvd.allgather(np.full((r + 1, 3), r, np.int64), name="at/gather")
            want = np.concatenate([np.full((q + 1, 3), q, np.int64) for q in range(n)])
            _check(got, want, f"step {step} allgather")
