"""Hierarchical allreduce/allgather on one machine: HOROVOD_TOPOLOGY_RANKS_PER_HOST makes every
N consecutive ranks one "host", so the two-level paths run under real MPI ranks here
(test_hierarchical.py); the compose cluster runs them across real containers."""

import os

import numpy as np

import horovod.numpy as hvd
from tests.support.reference import DTYPES, check, make, reference


def sc_host_topology():
    """local_rank/local_size/cross_* follow the fake hosts."""
    per_host = int(os.environ["HOROVOD_TOPOLOGY_RANKS_PER_HOST"])
    r, n = hvd.rank(), hvd.size()
    host, hosts = r // per_host, (n + per_host - 1) // per_host
    assert hvd.local_rank() == r % per_host, (hvd.local_rank(), r)
    assert hvd.local_size() == min(per_host, n - host * per_host), hvd.local_size()
    assert hvd.cross_rank() == host, (hvd.cross_rank(), host)
    assert hvd.cross_size() == len(range(r % per_host, n, per_host)), hvd.cross_size()
    assert hvd.is_homogeneous() == (n % per_host == 0), hvd.is_homogeneous()
    assert hosts >= 1


def sc_uneven_sizes():
    """Buffers that do not split evenly over the local ranks, and ones smaller than a host."""
    r, n = hvd.rank(), hvd.size()
    for count in (1, 2, 3, 5, 7, 1001, 65537, 300007):
        for dt in (np.dtype(np.float32), np.dtype(np.int32)):
            x = make(r, (count,), dt)
            got = hvd.allreduce(x, op=hvd.Sum, name=f"uneven/{dt.name}/{count}")
            check(
                got,
                reference([make(q, (count,), dt) for q in range(n)], "sum", dt),
                dt,
                f"sum {dt} {count}",
            )
        x = make(r, (count,), np.dtype(np.float64))
        got = hvd.allreduce(x, op=hvd.Average, name=f"uneven/avg/{count}", postscale_factor=2.0)
        want = (
            reference(
                [make(q, (count,), np.dtype(np.float64)) for q in range(n)],
                "average",
                np.dtype(np.float64),
            )
            * 2.0
        )
        check(got, want, np.dtype(np.float64), f"average {count}")


def sc_pipelined_blocks():
    """Buffers of 2 or more 4 MiB blocks take the pipelined path (each block's cross-host ring on
    a second thread): odd sizes that split unevenly into blocks and into each block's segments,
    Average with a postscale (scaled on that thread), and a group of tensors in separate arrays."""
    r, n = hvd.rank(), hvd.size()
    for count, dt, op in (
        (2_500_003, np.dtype(np.float32), "sum"),
        (3_000_001, np.dtype(np.int32), "sum"),
        (4_400_007, np.dtype(np.float64), "average"),
    ):
        x = make(r, (count,), dt)
        hop = hvd.Sum if op == "sum" else hvd.Average
        scale = 1.0 if op == "sum" else 0.5
        got = hvd.allreduce(x, op=hop, name=f"blocks/{dt.name}/{count}", postscale_factor=scale)
        want = reference([make(q, (count,), dt) for q in range(n)], op, dt) * scale
        check(got, want, dt, f"{op} {dt} {count}")
    shapes = [(1_000_003,), (7,), (2_000_001,), (5, 3)]
    dt = np.dtype(np.float32)
    xs = [make(r, s, dt, salt=i) for i, s in enumerate(shapes)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="blocks/group")
    for i, (s, got) in enumerate(zip(shapes, outs)):
        check(got, reference([make(q, s, dt, salt=i) for q in range(n)], "sum", dt), dt, f"g{i}")


def sc_grouped_fused():
    """A fused group goes through the fusion buffer and the hierarchical path together."""
    r, n = hvd.rank(), hvd.size()
    shapes = [(1000,), (3, 5), (40000,), (7,)]
    for dt in DTYPES:
        xs = [make(r, s, dt, salt=i) for i, s in enumerate(shapes)]
        outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name=f"hgroup/{dt.name}")
        for i, (s, got) in enumerate(zip(shapes, outs)):
            want = reference([make(q, s, dt, salt=i) for q in range(n)], "sum", dt)
            check(got, want, dt, f"group {dt} {i}")


def sc_allgather_rows():
    """Rows that differ per rank (some ranks none), wide and narrow."""
    r, n = hvd.rank(), hvd.size()
    for width in (1, 3, 5000):
        rows = lambda q: (q * 3 + 1) % 4  # noqa: E731  0..3 rows, some ranks none
        x = np.full((rows(r), width), r + 1, np.float32) + np.arange(width, dtype=np.float32)
        got = hvd.allgather(x, name=f"hag/{width}")
        want = np.concatenate(
            [np.full((rows(q), width), q + 1, np.float32) + np.arange(width) for q in range(n)]
        )
        assert got.shape == want.shape and (got == want).all(), (width, got.shape, want.shape)
