"""Quick correctness check of every collective: `mpirun -np 2 python -m horovod.selftest`.
`--gpu` checks the NCCL collectives on GPU tensors instead (TensorFlow, one GPU per rank); on a
machine or container without a visible GPU it fails at once, saying so.

Prints one PASS/FAIL line per check (rank 0 prints; every rank checks) and exits non-zero if
any check failed on any rank. Used by the image tests and handy on a new cluster.
"""

import sys
import time

import numpy as np

import horovod.numpy as hvd


def _checks(r, n):
    tri = n * (n - 1) / 2  # sum of ranks
    x = np.full(1 << 20, r, np.float32)
    yield (
        "allreduce sum float32 4 MiB (ring)",
        np.all(hvd.allreduce(x, op=hvd.Sum, name="st.sum") == tri),
    )
    y = hvd.allreduce(np.full((3, 5), r + 1.0), op=hvd.Average, name="st.avg")
    yield "allreduce average float64", np.allclose(y, (n + 1) / 2)
    y = hvd.allreduce(np.arange(7, dtype=np.int32) * (r + 1), op=hvd.Max, name="st.max")
    yield "allreduce max int32", np.array_equal(y, np.arange(7) * n)
    h = hvd.allreduce(np.full(1000, 2, np.float16), op=hvd.Sum, name="st.f16")
    yield "allreduce sum float16", np.all(h == 2 * n)
    outs = hvd.grouped_allreduce(
        [np.full(100 + i, r, np.float32) for i in range(16)], op=hvd.Sum, name="st.group"
    )
    yield "grouped allreduce (fused)", all(np.all(o == tri) for o in outs)
    g = hvd.allgather(np.full((r + 1, 2), r, np.int64), name="st.gather")
    want = np.concatenate([np.full((q + 1, 2), q, np.int64) for q in range(n)])
    yield "allgather, first dim differs per rank", np.array_equal(g, want)
    b = hvd.broadcast(np.full(10, r, np.float64), root_rank=n - 1, name="st.bcast")
    yield f"broadcast from rank {n - 1}", np.all(b == n - 1)
    a, splits = hvd.alltoall(np.full(2 * n, r, np.int32), name="st.a2a")
    yield "alltoall", np.array_equal(a, np.repeat(np.arange(n), 2)) and list(splits) == [2] * n
    rs = hvd.reducescatter(np.ones((2 * n, 3), np.float32), op=hvd.Sum, name="st.rs")
    yield "reducescatter", rs.shape == (2, 3) and np.all(rs == n)


def _gpu_visible():
    """Every rank checks its own GPU before any collective, so no rank waits for one that has
    none: each says why and the job ends."""
    from horovod import _core

    try:
        return _core.gpu_device_count()
    except Exception as e:  # no GPU build, no driver, or no device
        print(f"horovod selftest --gpu: FAIL: {e}", file=sys.stderr, flush=True)
        return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    gpu = "--gpu" in argv
    start = time.time()
    if gpu:
        if not _gpu_visible():
            return 2
        import os

        from horovod.tensorflow import gpu_checks

        gpu_checks.pin_gpu(int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    failures = 0
    for what, ok in gpu_checks.checks(r, n) if gpu else _checks(r, n):
        ok = bool(ok)
        # Agree on the verdict so rank 0's line speaks for every rank.
        bad = int(
            hvd.allreduce(
                np.array([0 if ok else 1], np.int32), op=hvd.Sum, name=f"st.verdict.{what}"
            )[0]
        )
        failures += bad > 0
        if r == 0:
            print(
                f"{'PASS' if bad == 0 else 'FAIL'}  {what}"
                + (f" (failed on {bad} rank(s))" if bad else ""),
                flush=True,
            )
    if r == 0:
        info = hvd.build_info()
        print(
            f"horovod {info['horovod_version']} selftest on {n} rank(s): "
            f"{'all checks passed' if failures == 0 else f'{failures} check(s) FAILED'} "
            f"in {time.time() - start:.1f} s ("
            + (
                f"NCCL {info['nccl_built']}"
                if gpu
                else f"{info['cpu_operations']} allreduce over "
                f"{info['mpi_library'].splitlines()[0]}"
            )
            + ")",
            flush=True,
        )
    hvd.shutdown()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
