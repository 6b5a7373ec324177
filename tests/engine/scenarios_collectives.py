"""Every collective x dtype x 1-3 dims x reduce op against NumPy, submission order, the cached
steady state, fusion (test_collectives.py)."""

import hashlib
import time

import numpy as np

import horovod.numpy as hvd
from horovod.common import handles as submission
from horovod.common.engine_types import ALLREDUCE
from tests.support.reference import DTYPES, check, is_float, make, ops, reference

OPS = ops(hvd)
SHAPES = [(1,), (17,), (5, 3), (3, 2, 4), (100003,)]


def sc_allreduce():
    r, n = hvd.rank(), hvd.size()
    cases = []
    for dt in DTYPES:
        for shape in SHAPES:
            for op in OPS:
                if op == "product" and int(np.prod(shape)) > 100 and not is_float(dt):
                    continue
                name = f"ar/{dt.name}/{'x'.join(map(str, shape))}/{op}"
                x = make(r, shape, dt, op)
                cases.append((name, dt, shape, op, hvd.allreduce_async(x, op=OPS[op], name=name)))
    # Scalars, in-place, and scale factors.
    scalar = hvd.allreduce(np.float64(r + 1), op=hvd.Sum, name="ar/scalar")
    check(np.asarray(scalar), np.asarray(n * (n + 1) / 2.0), np.dtype(np.float64), "scalar")
    inplace = np.full(1000, r + 1, np.int64)
    hvd.allreduce(inplace, op=hvd.Sum, name="ar/inplace", out=inplace)
    assert (inplace == n * (n + 1) // 2).all(), "in-place allreduce"
    # (33,): the direct exchange scales everything; (20001,): the ring scales each rank's own
    # segment before the allgather.
    for dt in [d for d in DTYPES if is_float(d)]:
        for shape in ((33,), (20001,)):
            x = make(r, shape, dt)
            got = hvd.allreduce(
                x,
                op=hvd.Average,
                name=f"ar/scale/{dt.name}/{shape[0]}",
                prescale_factor=0.5,
                postscale_factor=3.0,
            )
            want = (
                reference(
                    [make(q, shape, dt).astype(np.float64) * 0.5 for q in range(n)], "average", dt
                )
                * 3.0
            )
            check(got, want, dt, f"scale {dt} {shape}")
    for name, dt, shape, op, h in cases:
        got = hvd.synchronize(h)
        check(got, reference([make(q, shape, dt, op) for q in range(n)], op, dt), dt, name)
    return len(cases)


def sc_allgather():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for tail in [(), (3,), (2, 4)]:
            rows = lambda q: (q + 1) if tail != (2, 4) else (0 if q == 1 else q + 2)  # noqa: E731
            x = make(r, (rows(r),) + tail, dt)
            got = hvd.allgather(x, name=f"ag/{dt.name}/{len(tail)}")
            want = np.concatenate([make(q, (rows(q),) + tail, dt) for q in range(n)])
            check(got, want.astype(np.float64), dt, f"allgather {dt} {tail}")


def sc_broadcast():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for shape in [(1,), (7, 3), (2, 3, 5), (300001,)]:
            for root in range(n):
                x = make(r, shape, dt)
                got = hvd.broadcast(x, root_rank=root, name=f"bc/{dt.name}/{len(shape)}/{root}")
                check(got, make(root, shape, dt).astype(np.float64), dt, f"broadcast root {root}")


def sc_alltoall():
    r, n = hvd.rank(), hvd.size()

    def splits_of(q):  # uneven, with a zero
        return [(q + d) % 3 for d in range(n)]

    for dt in DTYPES:
        for tail in [(), (2,), (2, 3)]:
            x = make(r, (sum(splits_of(r)),) + tail, dt)
            got, recv = hvd.alltoall(x, splits=splits_of(r), name=f"a2a/{dt.name}/{len(tail)}")
            parts = []
            for q in range(n):
                sq = splits_of(q)
                xq = make(q, (sum(sq),) + tail, dt)
                parts.append(xq[sum(sq[:r]) : sum(sq[: r + 1])])
            assert list(recv) == [splits_of(q)[r] for q in range(n)], f"received splits {recv}"
            check(got, np.concatenate(parts).astype(np.float64), dt, f"alltoall {dt} {tail}")
    got, recv = hvd.alltoall(np.arange(2 * n, dtype=np.float32) + 100 * r, name="a2a/even")
    assert list(recv) == [2] * n


def sc_reducescatter():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for shape in [(n * 2 + 1,), (5, 3), (7, 2, 2)]:
            for op in ("sum", "average", "max"):
                x = make(r, shape, dt, op)
                got = hvd.reducescatter(x, op=OPS[op], name=f"rs/{dt.name}/{len(shape)}/{op}")
                full = reference([make(q, shape, dt, op) for q in range(n)], op, dt)
                rows = [shape[0] // n + (1 if q < shape[0] % n else 0) for q in range(n)]
                start = sum(rows[:r])
                check(got, full[start : start + rows[r]], dt, f"reducescatter {dt} {shape} {op}")


def sc_bool_moves():
    """NumPy bool arrays move as bool (allgather, broadcast incl. out=, alltoall, async): values
    and dtype arrive intact, every byte 0 or 1. Before, bool was refused (on every rank here)."""
    r, n = hvd.rank(), hvd.size()

    def flags(q, rows):
        return (np.arange(rows * 3).reshape(rows, 3) + q) % 3 == 0

    def exact(got, want, what):
        assert got.dtype == np.bool_ and got.shape == want.shape, (what, got.dtype, got.shape)
        assert np.array_equal(got, want), (what, got, want)
        assert set(np.unique(got.view(np.uint8))) <= {0, 1}, (what, "bytes other than 0/1")

    got = hvd.allgather(flags(r, r + 1), name="bool/ag")
    exact(got, np.concatenate([flags(q, q + 1) for q in range(n)]), "allgather")
    for root in range(n):
        exact(hvd.broadcast(flags(r, 4), root, name=f"bool/bc/{root}"), flags(root, 4), "bcast")
    out = np.zeros((4, 3), bool)
    hvd.broadcast(flags(r, 4), n - 1, name="bool/bc/out", out=out)
    exact(out, flags(n - 1, 4), "broadcast out=")
    splits = [q + 1 for q in range(n)]  # every rank sends q + 1 rows to rank q
    start, rows = sum(splits[:r]), sum(splits)
    got, recv = hvd.alltoall(flags(r, rows), splits=splits, name="bool/a2a")
    exact(got, np.concatenate([flags(q, rows)[start : start + r + 1] for q in range(n)]), "a2a")
    assert list(recv) == [r + 1] * n, recv
    h = hvd.allgather_async(np.array([r % 2 == 0]), name="bool/ag/async")
    exact(hvd.synchronize(h), np.array([q % 2 == 0 for q in range(n)]), "allgather async")


def sc_fused_over_tensors():
    """A fused ring runs over the tensors themselves (ops/ring_allreduce.cc): sizes that put
    chunk and segment boundaries inside tensors, empty tensors among them, every dtype and op,
    prescale (which takes the fusion buffer) next to postscale, and inputs reduced in place."""
    _fused_every_dtype_and_op()
    _fused_scaled()
    _fused_empty_alone()
    _fused_in_place()
    _fused_inputs_kept()
    _fused_memory_layouts()


# Tensors under 16 KiB are packed into the fusion buffer as one piece, larger ones are pieces of
# their own: these sizes give both in every dtype, small and large interleaved.
_PIECE_SHAPES = [(0,), (1,), (1000,), (4097,), (3, 5), (0, 4), (30011,), (7,), (200003,)]


def _fused_every_dtype_and_op():
    r, n = hvd.rank(), hvd.size()
    for dt in DTYPES:
        for op in OPS:
            xs = [make(r, s, dt, op, salt=i) for i, s in enumerate(_PIECE_SHAPES)]
            outs = hvd.grouped_allreduce(xs, op=OPS[op], name=f"pieces/{dt.name}/{op}")
            for i, (s, got) in enumerate(zip(_PIECE_SHAPES, outs)):
                want = reference([make(q, s, dt, op, salt=i) for q in range(n)], op, dt)
                check(got, want, dt, f"pieces {dt} {op} {i}")


def _fused_scaled():
    r, n = hvd.rank(), hvd.size()
    for pre, post in ((1.0, 3.0), (0.5, 1.0)):
        dt = np.dtype(np.float64)
        xs = [make(r, s, dt, salt=i) for i, s in enumerate(_PIECE_SHAPES)]
        outs = hvd.grouped_allreduce(
            xs,
            op=hvd.Average,
            name=f"pieces/scaled/{pre}",
            prescale_factor=pre,
            postscale_factor=post,
        )
        for i, (s, got) in enumerate(zip(_PIECE_SHAPES, outs)):
            want = reference([make(q, s, dt, salt=i) * pre for q in range(n)], "average", dt)
            check(got, want * post, dt, f"pieces scaled {pre} {i}")


def _fused_empty_alone():
    """Empty on every rank and alone in its response: nothing to exchange, the empty result."""
    for dt in (np.dtype(np.float32), np.dtype(np.int32)):
        got = hvd.allreduce(np.zeros((0, 4), dt), op=hvd.Average, name=f"pieces/empty/{dt.name}")
        assert got.shape == (0, 4) and got.dtype == dt, (got.shape, got.dtype)


def _fused_in_place():
    """Each input is its own output."""
    r, n = hvd.rank(), hvd.size()
    xs = [np.full(s, r + 1, np.int64) for s in _PIECE_SHAPES]
    handles = [
        hvd.allreduce_async(x, op=hvd.Sum, name=f"pieces/inplace/{i}", out=x)
        for i, x in enumerate(xs)
    ]
    for h in handles:
        hvd.synchronize(h)
    assert all((x == n * (n + 1) // 2).all() for x in xs), "in-place fused allreduce"


def _fused_inputs_kept():
    """The inputs of an out-of-place fused allreduce are left as they were."""
    xs = [make(hvd.rank(), s, np.dtype(np.float32), salt=i) for i, s in enumerate(_PIECE_SHAPES)]
    before = [x.copy() for x in xs]
    hvd.grouped_allreduce(xs, op=hvd.Sum, name="pieces/inputs")
    assert all((a == b).all() for a, b in zip(xs, before)), "the inputs were written"


def _fused_memory_layouts():
    """Each rank sends pieces that lie back to back in its memory without a copy and packs the
    others, deciding from its own addresses; the messages are cut from the counts alone, so
    the ranks' layouts may differ: inputs and outputs as views of one array or as arrays of
    their own, alike on every rank or only on rank 0. The sizes (float32, >= 16 KiB each) put
    chunk and segment boundaries inside tensors, and pieces on both sides of the
    reduce-scatter's own-message floor (128 KiB) where the chunks are larger than it."""
    r, n = hvd.rank(), hvd.size()
    dt, sizes = np.dtype(np.float32), [4100, 8192, 300001, 5000, 12288, 70001]

    def laid(arrays, joint):
        if not joint:
            return [a.copy() for a in arrays]
        block = np.concatenate(arrays)
        return list(np.split(block, np.cumsum([a.size for a in arrays])[:-1]))

    for case, (src_joint, dst_joint) in enumerate(
        [(True, True), (r == 0, True), (True, r == 0), (r == 0, r == 0), (False, False)]
    ):
        xs = laid([make(r, (m,), dt, salt=i) for i, m in enumerate(sizes)], src_joint)
        outs = laid([np.zeros(m, dt) for m in sizes], dst_joint)
        before = [x.copy() for x in xs]
        hvd.synchronize(
            submission.submit(  # the group's tensors are "pieces/runs/<case>.<i>"
                ALLREDUCE,
                f"pieces/runs/{case}",
                xs,
                outs,
                hvd.Sum,
                grouped=True,
                process_set=hvd.global_process_set,
            )
        )
        for i, (m, got) in enumerate(zip(sizes, outs)):
            want = reference([make(q, (m,), dt, salt=i) for q in range(n)], "sum", dt)
            check(got, want, dt, f"runs case {case} tensor {i}")
        assert all((a == b).all() for a, b in zip(xs, before)), f"runs case {case}: inputs written"


def sc_grouped():
    r, n = hvd.rank(), hvd.size()
    xs = [make(r, (i * 10 + 1,), np.dtype(np.float32), salt=i) for i in range(20)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grp")
    for i, got in enumerate(outs):
        want = reference(
            [make(q, (i * 10 + 1,), np.dtype(np.float32), salt=i) for q in range(n)],
            "sum",
            np.dtype(np.float32),
        )
        check(got, want, np.dtype(np.float32), f"grouped {i}")
    # Large enough for the ring: fused through the fusion buffer, averaged and postscaled on
    # each rank's own segment.
    for dt in (np.dtype(np.float64), np.dtype(np.int32)):
        shapes = [(700 + 13 * i,) for i in range(12)]
        xs = [make(r, s, dt, salt=i) for i, s in enumerate(shapes)]
        outs = hvd.grouped_allreduce(
            xs,
            op=hvd.Average,
            name=f"grp/ring/{dt.name}",
            postscale_factor=2.0 if is_float(dt) else 1.0,
        )
        for i, got in enumerate(outs):
            want = reference([make(q, shapes[i], dt, salt=i) for q in range(n)], "average", dt)
            check(got, want * (2.0 if is_float(dt) else 1.0), dt, f"grouped ring {dt} {i}")


def sc_order():
    """Ranks submit the same tensors in different orders; results must still match by name."""
    r, n = hvd.rank(), hvd.size()
    names = [f"ord/{i}" for i in range(30)]
    order = list(range(30))
    np.random.default_rng(r).shuffle(order)
    handles = {}
    for i in order:
        handles[i] = hvd.allreduce_async(
            np.full(64, i * (r + 1), np.int64), op=hvd.Sum, name=names[i]
        )
        if i % 7 == r:
            time.sleep(0.002)
    for i in range(30):
        got = hvd.synchronize(handles[i])
        assert (got == i * n * (n + 1) // 2).all(), f"{names[i]}: {got[:3]}"


def sc_steady():
    """Same names every step (the cached fast path), then a legal shape change on all ranks."""
    r, n = hvd.rank(), hvd.size()
    for step in range(200):
        hs = [
            hvd.allreduce_async(np.full(8 + i, step + r, np.float64), op=hvd.Sum, name=f"w{i}")
            for i in range(5)
        ]
        for h in hs:
            got = hvd.synchronize(h)
            assert (got == n * step + n * (n - 1) / 2).all(), f"step {step}: {got}"
    got = hvd.allreduce(np.ones(20), op=hvd.Sum, name="w0")  # new shape for a cached name
    assert (got == n).all()
    got = hvd.allreduce(np.ones(20, np.int32), op=hvd.Sum, name="w0")  # new dtype
    assert (got == n).all() and got.dtype == np.int32


def sc_fusion_digest():
    """Prints a digest of many small fused/unfused results; the test compares two runs.

    Values are multiples of 1/8, so every float sum is exact whatever the order: with 3+ ranks
    the ring adds an element's contributions in an order that depends on its segment, which
    fusion shifts, so arbitrary floats could differ in the last bit (as with MPI or NCCL)."""
    r = hvd.rank()
    rng = np.random.default_rng(r)
    xs = [(rng.integers(-800, 800, 1000 + 37 * i) / 8).astype(np.float32) for i in range(40)]
    xs += [rng.integers(-1000, 1000, 333 + i).astype(np.int64) for i in range(5)]
    hs = [hvd.allreduce_async(x, op=hvd.Sum, name=f"fz/{i}") for i, x in enumerate(xs)]
    outs = [hvd.synchronize(h) for h in hs]
    outs += hvd.grouped_allreduce(xs, op=hvd.Average, name="fzg")
    digest = hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()
    print(f"DIGEST rank={r} {digest}")


def sc_eager():
    """Small allreduces repeated under the same names: after the first step they are cached and
    their data travels with the negotiation round (eager), reduced locally on every rank. Every
    dtype and op, scale factors (a prescale keeps the tensor out of the eager path), more than
    the round's payload limit at once, and a rank that submits late (the others resend their data
    every round until it arrives)."""
    r, n = hvd.rank(), hvd.size()
    small = [d for d in DTYPES]
    for step in range(6):
        late = step % n  # this rank submits its second half 20 ms after the others
        cases = []
        for i, dt in enumerate(small):
            for op in OPS:
                shape = (17,) if i % 2 else (5, 3)
                x = make(r, shape, dt, op, salt=step)
                if r == late and len(cases) == len(small) * len(OPS) // 2:
                    time.sleep(0.02)
                name = f"eager/{dt.name}/{op}"
                cases.append((name, dt, shape, op, hvd.allreduce_async(x, op=OPS[op], name=name)))
        # 40 x 1 KiB: more than HOROVOD_EAGER_ALLREDUCE_BYTES (16 KiB) at once.
        many = [
            hvd.allreduce_async(np.full(256, r + i + step, np.float32), op=hvd.Sum, name=f"eg/{i}")
            for i in range(40)
        ]
        scaled = []
        for dt in [d for d in small if is_float(d)]:
            x = make(r, (33,), dt, salt=step)
            post = hvd.allreduce_async(
                x, op=hvd.Average, name=f"eager/post/{dt.name}", postscale_factor=3.0
            )
            pre = hvd.allreduce_async(
                x, op=hvd.Sum, name=f"eager/pre/{dt.name}", prescale_factor=0.5
            )
            scaled.append((dt, post, pre, step))
        for name, dt, shape, op, h in cases:
            want = reference([make(q, shape, dt, op, salt=step) for q in range(n)], op, dt)
            check(hvd.synchronize(h), want, dt, f"{name} step {step}")
        for i, h in enumerate(many):
            got = hvd.synchronize(h)
            assert (got == sum(q + i + step for q in range(n))).all(), f"eg/{i}: {got[:3]}"
        for dt, post, pre, s in scaled:
            ins = [make(q, (33,), dt, salt=s).astype(np.float64) for q in range(n)]
            check(hvd.synchronize(post), reference(ins, "average", dt) * 3.0, dt, f"post {dt}")
            check(
                hvd.synchronize(pre), reference([x * 0.5 for x in ins], "sum", dt), dt, f"pre {dt}"
            )
    # In place: the data went out with the round before the output is written.
    buf = np.full(100, r + 1, np.int64)
    for _ in range(3):
        buf[:] = r + 1
        hvd.allreduce(buf, op=hvd.Sum, name="eager/inplace", out=buf)
        assert (buf == n * (n + 1) // 2).all(), f"in-place eager: {buf[:3]}"
