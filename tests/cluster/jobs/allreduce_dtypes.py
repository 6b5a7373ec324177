"""Every dtype's allreduce (Sum, Min, Max, Product; Average for floats), allgather and
broadcast across every rank of the cluster (on 2 slots per worker above 32 KiB these take the
hierarchical paths). Each rank checks the results against NumPy and prints
`OK dtypes rank=R host=H`."""

import socket
import sys

import numpy as np

import horovod.numpy as hvd

DTYPES = ["uint8", "int8", "int32", "int64", "float16", "float32", "float64"]


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    bad = []
    for dt in DTYPES:
        for count in (1, 1000, 1 << 18):  # one element, the small path, the ring
            x = (np.arange(count) % 7 + r).astype(dt)
            got = hvd.allreduce(x, op=hvd.Sum, name=f"sum.{dt}.{count}")
            want = sum((np.arange(count) % 7 + q).astype(dt) for q in range(n)).astype(dt)
            if not np.array_equal(got, want):
                bad.append(f"sum {dt} x{count}")
        for op, fold in (("min", np.minimum), ("max", np.maximum), ("product", np.multiply)):
            # 64 Ki elements: above the direct exchange, so the ring or the hierarchical path.
            base = np.arange(1 << 16)

            def rank_input(q):
                return ((base + q) % 3 if op == "product" else (base * (q + 1)) % 13).astype(dt)

            got = hvd.allreduce(rank_input(r), op=getattr(hvd, op.capitalize()), name=f"{op}.{dt}")
            want = rank_input(0)
            for q in range(1, n):
                want = fold(want, rank_input(q)).astype(dt)
            if not np.array_equal(got, want):
                bad.append(f"{op} {dt}")
        if dt.startswith("float"):
            got = hvd.allreduce(np.full(5000, r, dt), op=hvd.Average, name=f"avg.{dt}")
            if not np.allclose(got.astype(np.float64), (n - 1) / 2, rtol=1e-2):
                bad.append(f"average {dt}")
        g = hvd.allgather(np.full((r + 1, 3), r, dt), name=f"gather.{dt}")
        if not np.array_equal(g, np.concatenate([np.full((q + 1, 3), q, dt) for q in range(n)])):
            bad.append(f"allgather {dt}")
        b = hvd.broadcast(np.full(100, r, dt), root_rank=n - 1, name=f"bcast.{dt}")
        if not np.all(b == n - 1):
            bad.append(f"broadcast {dt}")
    host = socket.gethostname()
    print(
        f"OK dtypes rank={r} host={host}"
        if not bad
        else f"FAIL dtypes rank={r} host={host}: {bad}",
        flush=True,
    )
    hvd.shutdown()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
