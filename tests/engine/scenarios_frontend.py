"""Frontend scenarios (horovod.numpy and its bindings), run on every rank under mpirun by
test_frontend.py (through scenarios.py)."""

import sys
import threading
import time

import numpy as np

import horovod.numpy as hvd
from horovod.common import arguments
from horovod.common import basics as _b
from tests.support.reference import DTYPES, check, make, reference


def expect_named(fn, *needles):
    """A local argument error (TypeError or ValueError, not pybind's generic signature dump)
    whose message contains every needle, typically the tensor's name."""
    try:
        fn()
    except (TypeError, ValueError) as e:
        msg = str(e)
        assert "incompatible function arguments" not in msg, msg
        for needle in needles:
            assert needle in msg, f"error {msg!r} lacks {needle!r}"
        return msg
    raise AssertionError(f"expected an error containing {needles}")


def named_splits(name, splits):
    """The splits check of the submission layer, its error as the caller raises it."""
    try:
        return arguments.checked(name, arguments.split_values, splits)
    except arguments.Refused as r:
        raise r.args[0] from None


def swapped(a):
    """`a` with the same values in the non-native byte order."""
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("S"))


def sc_byteorder():
    """Non-native byte order inputs are reduced by value; results come back native."""
    r, n = hvd.rank(), hvd.size()
    multi = [dt for dt in DTYPES if dt.itemsize > 1 and dt.kind in "iuf"]
    # The reported cases, written as big-endian literals.
    got = hvd.allreduce(np.array([1.0, 2.0], ">f8"), op=hvd.Sum, name="bo/f8")
    assert got.dtype == np.float64 and got.tolist() == [n * 1.0, n * 2.0], got
    got = hvd.allreduce(np.array([255, 1], ">i4"), op=hvd.Sum, name="bo/i4")
    assert got.dtype == np.int32 and got.tolist() == [255 * n, n], got
    for dt in multi:
        for shape in ((5,), (100003,)):  # direct exchange and ring
            x = swapped(make(r, shape, dt))
            keep = x.copy()
            got = hvd.synchronize(
                hvd.allreduce_async(x, op=hvd.Sum, name=f"bo/ar/{dt.name}/{shape[0]}")
            )
            check(
                got,
                reference([make(q, shape, dt) for q in range(n)], "sum", dt),
                dt,
                f"allreduce {dt} {shape}",
            )
            assert np.array_equal(x, keep) and x.dtype == keep.dtype, "input changed"
        for root in range(n):
            got = hvd.broadcast(
                swapped(make(r, (7, 3), dt)), root_rank=root, name=f"bo/bc/{dt.name}/{root}"
            )
            check(got, make(root, (7, 3), dt).astype(np.float64), dt, f"broadcast {dt}")
        got = hvd.allgather(swapped(make(r, (r + 1, 2), dt)), name=f"bo/ag/{dt.name}")
        want = np.concatenate([make(q, (q + 1, 2), dt) for q in range(n)])
        check(got, want.astype(np.float64), dt, f"allgather {dt}")
        splits = [(r + d) % 3 for d in range(n)]
        got, recv = hvd.alltoall(
            swapped(make(r, (sum(splits),), dt)),
            splits=swapped(np.array(splits, np.int64)),
            name=f"bo/a2a/{dt.name}",
        )
        parts = []
        for q in range(n):
            sq = [(q + d) % 3 for d in range(n)]
            parts.append(make(q, (sum(sq),), dt)[sum(sq[:r]) : sum(sq[: r + 1])])
        check(got, np.concatenate(parts).astype(np.float64), dt, f"alltoall {dt}")
        shape = (2 * n + 1, 3)
        got = hvd.reducescatter(swapped(make(r, shape, dt)), op=hvd.Sum, name=f"bo/rs/{dt.name}")
        full = reference([make(q, shape, dt) for q in range(n)], "sum", dt)
        rows = [shape[0] // n + (1 if q < shape[0] % n else 0) for q in range(n)]
        check(got, full[sum(rows[:r]) : sum(rows[: r + 1])], dt, f"reducescatter {dt}")
    # A group mixing both byte orders, including a ring-sized member.
    shapes = [(3,), (40000,), (5, 2)]
    xs = [make(r, s, np.dtype(np.float64), salt=i) for i, s in enumerate(shapes)]
    outs = hvd.grouped_allreduce([xs[0], swapped(xs[1]), swapped(xs[2])], op=hvd.Sum, name="bo/grp")
    for i, got in enumerate(outs):
        want = reference(
            [make(q, shapes[i], np.dtype(np.float64), salt=i) for q in range(n)],
            "sum",
            np.dtype(np.float64),
        )
        check(got, want, np.dtype(np.float64), f"grouped {i}")
    # An output cannot be converted behind the caller's back: the binding refuses it.
    x = np.ones(4)
    expect_named(
        lambda: hvd.allreduce(x, name="bo/out", out=swapped(np.zeros(4))), "bo/out", "byte order"
    )
    big = swapped(np.ones(4))
    expect_named(lambda: hvd.allreduce(big, name="bo/inplace", out=big), "bo/inplace", "byte order")
    # The binding's own check, for a caller that skips the frontend's conversion.
    lib = hvd._b._lib()
    expect_named(
        lambda: lib.enqueue(0, ["bo/raw"], [swapped(np.ones(3))], None, 0, 0, 1.0, 1.0, []),
        "bo/raw",
        "byte order",
    )
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="bo/after") == n).all()


def sc_overlap():
    """out= partially overlapping the input gives the right result; exact aliasing is in place."""
    r, n = hvd.rank(), hvd.size()
    ranks_sum = n * (n - 1) / 2
    for N in (10, 200000):  # 80 B: direct exchange; 1.6 MB: ring
        y = np.arange(N + 1.0) + r
        out = y[1:]
        got = hvd.allreduce(y[:N], op=hvd.Sum, out=out, name=f"ov/after/{N}")
        assert got is out
        bad = np.count_nonzero(y[1:] != n * np.arange(N) + ranks_sum)
        assert bad == 0, f"N={N}, out after the input: {bad} wrong"
        y = np.arange(N + 1.0) + r
        hvd.synchronize(hvd.allreduce_async(y[1:], op=hvd.Sum, out=y[:N], name=f"ov/before/{N}"))
        bad = np.count_nonzero(y[:N] != n * np.arange(1, N + 1) + ranks_sum)
        assert bad == 0, f"N={N}, out before the input: {bad} wrong"
        # Same memory through two view objects: exact aliasing, reduced in place.
        y = np.arange(N + 1.0) + r
        hvd.allreduce(y[:N], op=hvd.Sum, out=y[:N], name=f"ov/same/{N}")
        assert np.array_equal(y[:N], n * np.arange(N) + ranks_sum) and y[N] == N + r
        x = np.arange(N, dtype=np.int64) + r
        assert hvd.allreduce(x, op=hvd.Sum, out=x, name=f"ov/inplace/{N}") is x
        assert np.array_equal(x, n * np.arange(N) + int(ranks_sum))
        for root in range(n):
            y = np.arange(N + 1.0) * (r + 1)
            hvd.broadcast(y[:N], root_rank=root, out=y[1:], name=f"ov/bc/{N}/{root}")
            assert np.array_equal(y[1:], np.arange(N) * (root + 1.0)), f"broadcast N={N}"
            y = np.arange(N + 1.0) * (r + 1)
            hvd.broadcast(y[1:], root_rank=root, out=y[:N], name=f"ov/bcb/{N}/{root}")
            assert np.array_equal(y[:N], np.arange(1, N + 1) * (root + 1.0)), f"bcast N={N}"


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS in /proc/self/status")


def wait_for(cond, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def sc_dropped_handles():
    """Handles dropped without synchronize() release their buffers once their op is done."""
    r, n = hvd.rank(), hvd.size()
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    lib = hvd._b._lib()
    elems = 5000  # 40 KB of float64
    for i in range(200):  # warm up allocator and engine before the baseline
        hvd.allreduce_async(np.ones(elems), op=hvd.Sum, name=f"dh/warm/{i}")
    hvd.allreduce(np.ones(1), name="dh/warm")
    wait_for(lambda: lib.live_handles() == 0, "warm-up handles to be released")
    base = rss_mb()
    kept, outs = [], []
    # Every 100th op is waited for, which bounds the ops in flight: a dropped op's arrays must
    # live until it is done, so an unbounded burst peaks at count x 80 KB whatever is freed.
    for i in range(count):
        x = np.full(elems, float(i + r))
        if i % 500 == 0:  # kept and synchronized at the end
            kept.append((i, hvd.allreduce_async(x, op=hvd.Sum, name=f"dh/{i}")))
        elif i % 250 == 0:  # dropped, but its out= array kept: the input lived long enough
            outs.append((i, np.zeros(elems)))
            hvd.allreduce_async(x, op=hvd.Sum, name=f"dh/{i}", out=outs[-1][1])
        elif i % 100 == 0:  # dropped once done
            dropped = hvd.allreduce_async(x, op=hvd.Sum, name=f"dh/{i}")
            wait_for(lambda: hvd.poll(dropped), f"dh/{i}")
            del dropped
        elif i % 90 == 0:  # a dropped group
            hvd.grouped_allreduce_async([x, x[:10]], op=hvd.Sum, name=f"dh/{i}")
        else:  # dropped while pending
            hvd.allreduce_async(x, op=hvd.Sum, name=f"dh/{i}")
        del x
    ranks_sum = n * (n - 1) / 2
    for i, h in kept:
        got = hvd.synchronize(h)
        assert np.array_equal(got, np.full(elems, n * i + ranks_sum)), f"kept dh/{i}: {got[:3]}"
    wait_for(lambda: lib.live_handles() == 0, "dropped handles to be released")
    for i, out in outs:
        assert np.array_equal(out, np.full(elems, n * i + ranks_sum)), f"dropped dh/{i}: {out[:3]}"
    grown = rss_mb() - base
    print(
        f"RSS rank={r} base={base:.1f} MB grown={grown:.1f} MB over {count} dropped handles",
        flush=True,
    )
    assert grown < 50, f"RSS grew {grown:.1f} MB over {count} dropped 40 KB allreduces"
    # A synchronized handle is released by synchronize() alone: a second call is a clear error,
    # and collecting it frees nothing twice.
    # (h bound as a default: ruff reads a closure over a name deleted just below as undefined.)
    expect_named(lambda h=h: hvd.synchronize(h), f"'dh/{kept[-1][0]}'", "already synchronized")
    del h, kept
    assert lib.live_handles() == 0
    # Handles still pending at shutdown (names no other rank submits) and dropped: shutdown
    # fails their ops, which must free them without breaking the exit. The barrier keeps any
    # rank from shutting down before every rank has submitted.
    for i in range(20):
        hvd.allreduce_async(np.ones(elems), name=f"dh/tail/{r}/{i}")
    hvd.allreduce(np.ones(1), name="dh/end")
    hvd.shutdown()
    assert lib.live_handles() == 0, "shutdown left abandoned handles behind"


def sc_output_blocks():
    """Outputs the binding allocates (same-shape ops without `out`): a call's are views of one
    block, each 64-byte aligned, C-contiguous, writable and independent of the others; a block
    is reused by a later call once every view of it has died, never while one lives. An
    allgather's output is a kept block of its own, alike."""
    r, n = hvd.rank(), hvd.size()
    dtypes = [np.float32, np.int8, np.float64, np.int16, np.float16]
    sizes = [7, 3, 1000, 0, 5]  # odd sizes and an empty tensor: offsets must still align

    def step(k):
        return [np.full(size, r + k, dt) for size, dt in zip(sizes, dtypes)]

    def total(k):
        return sum(q + k for q in range(n))

    def check_step(got, k, what):
        assert len(got) == len(sizes), what
        for a, size, dt in zip(got, sizes, dtypes):
            assert a.dtype == dt and a.shape == (size,), (what, a.dtype, a.shape)
            assert a.flags.c_contiguous and a.flags.writeable, (what, a.flags)
            if size:
                assert a.ctypes.data % 64 == 0, (what, hex(a.ctypes.data))
                assert np.all(a == total(k)), (what, a[:3])

    first = hvd.grouped_allreduce(step(1), op=hvd.Sum, name="ob/group")
    check_step(first, 1, "first")
    first[0][:] = -1  # its neighbours in the block are untouched
    assert all(np.all(a == total(1)) for a in first[1:]), "writing one output changed another"
    first[0][:] = total(1)
    ptrs = [a.ctypes.data for a in first]
    # A call while the first's outputs live gets another block: the first keeps its values.
    second = hvd.grouped_allreduce(step(2), op=hvd.Sum, name="ob/group")
    check_step(second, 2, "second")
    check_step(first, 1, "first, after the second call")
    assert not set(ptrs) & {a.ctypes.data for a in second}, "two live calls share memory"
    # One view kept alive keeps the whole block: a third call must not write into it.
    last = first[2]
    del first
    third = hvd.grouped_allreduce(step(3), op=hvd.Sum, name="ob/group")
    check_step(third, 3, "third")
    assert np.all(last == total(1)), "a live view's block was reused"
    # Once every view has died the block is reused: the next call writes into mapped pages.
    del last, second
    fourth = hvd.grouped_allreduce(step(4), op=hvd.Sum, name="ob/group")
    check_step(fourth, 4, "fourth")
    reused = {a.ctypes.data for a in fourth} & set(ptrs)
    assert reused, "a freed block of the same size was not reused"
    _single_op_blocks(r, n)
    _allgather_blocks(r, n)


def _single_op_blocks(r, n):
    """sc_output_blocks' large blocks, single ops' blocks, and the binding's mixed outputs."""
    # A large block (huge pages: a model's gradients) is kept and reused the same way.
    big = [np.full(3 << 20, r + 1, np.float32), np.full(5, r + 1, np.float32)]
    first_big = hvd.grouped_allreduce(big, op=hvd.Sum, name="ob/big")
    base = first_big[0].ctypes.data
    del first_big
    again = hvd.grouped_allreduce(big, op=hvd.Sum, name="ob/big")
    assert all(np.all(a == n * (n + 1) // 2) for a in again), "large block results"
    assert again[0].ctypes.data == base, "a freed large block was not reused"
    # Single ops without `out` take a block too.
    x = np.arange(33, dtype=np.float64) + r
    got = hvd.allreduce(x, op=hvd.Sum, name="ob/single")
    assert got.ctypes.data % 64 == 0 and got.flags.writeable
    assert np.array_equal(got, n * np.arange(33.0) + n * (n - 1) / 2), got[:3]
    got = hvd.broadcast(np.full((4, 3), r, np.int32), root_rank=n - 1, name="ob/bcast")
    assert got.shape == (4, 3) and np.all(got == n - 1), got
    hvd.synchronize(hvd.allreduce_async(np.ones(3), name="ob/async"))  # dropped at once: freed
    # The binding called directly with None in one tensor's output slot and an array in the
    # other's: the None slot gets a block view (it was left without an output: a crash).
    given = np.full(4, -1.0)
    got = _b._lib().enqueue_wait(
        0,
        ["ob/mixed.0", "ob/mixed.1"],
        [np.full(6, r + 1.0), np.full(4, r + 1.0)],
        [None, given],
        int(hvd.Sum),
        0,
        1.0,
        1.0,
        [],
        -1,
        "",
        "ob/mixed",
        0,
    )
    want = n * (n + 1) / 2
    assert np.all(got[0][0] == want) and got[0][0].ctypes.data % 64 == 0, got[0][0]
    assert got[1][0] is given and np.all(given == want), (got[1][0], given)


def _allgather_blocks(r, n):
    """sc_output_blocks' allgather outputs: kept blocks of their own."""
    # Variable-size outputs (allgather) take a kept block of their own: from 4 MiB on on a 2 MiB
    # page, kept when the array dies and reused by the next call, never while the array lives.
    rows = 3 << 18  # 3 MiB of float32 from each rank
    lib = _b._lib()

    def gathered(k):
        out = hvd.allgather(np.full(rows, r + k, np.float32), name="ob/gather")
        want = np.concatenate([np.full(rows, q + k, np.float32) for q in range(n)])
        assert np.array_equal(out, want), (k, out[::rows])
        return out

    first = gathered(0)
    at, kept = first.ctypes.data, lib.kept_host_bytes()
    assert at % (2 << 20) == 0, f"allgather output of {3 * n} MiB at {at:#x}, not on a 2 MiB page"
    del first
    assert lib.kept_host_bytes() >= kept + 4 * n * rows, "a dead output's block not kept"
    assert gathered(1).ctypes.data == at, "a kept allgather block was not reused"
    held = gathered(2)
    again = gathered(3)
    assert again.ctypes.data != held.ctypes.data, "a live allgather output's block was reused"
    assert np.all(held[:rows] == 2) and np.all(held[-rows:] == n + 1), held[::rows]


def sc_bad_args():
    """Every bad argument is a TypeError/ValueError naming the tensor, on every rank: raised
    locally, or, for alltoall splits, negotiated (a ValueError then)."""
    r, n = hvd.rank(), hvd.size()
    x = np.ones(4)
    obj = np.array([object(), object()])
    cases = {
        "ba/root-float": lambda nm: hvd.broadcast(x, root_rank=1.5, name=nm),
        "ba/root-npfloat": lambda nm: hvd.broadcast(x, root_rank=np.float64(0), name=nm),
        "ba/root-str": lambda nm: hvd.broadcast(x, root_rank="0", name=nm),
        "ba/root-huge": lambda nm: hvd.broadcast(x, root_rank=2**40, name=nm),
        "ba/pre": lambda nm: hvd.allreduce(x, name=nm, prescale_factor="x"),
        "ba/pre-str-number": lambda nm: hvd.allreduce(x, name=nm, prescale_factor="2"),
        "ba/post": lambda nm: hvd.allreduce(x, name=nm, postscale_factor=None),
        "ba/grp-pre": lambda nm: hvd.grouped_allreduce([x, x], name=nm, prescale_factor="x"),
        "ba/rs-post": lambda nm: hvd.reducescatter(x, name=nm, postscale_factor=[1.0, 2.0]),
        "ba/split-float": lambda nm: hvd.alltoall(x, splits=[1.5] + [2.5] + [0] * (n - 2), name=nm),
        "ba/split-2**64": lambda nm: hvd.alltoall(x, splits=[2**64] + [0] * (n - 1), name=nm),
        "ba/split-neg": lambda nm: hvd.alltoall(x, splits=[-(2**63) - 1] + [0] * (n - 1), name=nm),
        "ba/split-str": lambda nm: hvd.alltoall(x, splits=["a"] * n, name=nm),
        "ba/split-none": lambda nm: hvd.alltoall(x, splits=[None] * n, name=nm),
        "ba/split-ragged": lambda nm: hvd.alltoall(x, splits=[[1], [1, 2]], name=nm),
        "ba/split-npfloat": lambda nm: hvd.alltoall(x, splits=np.full(n, 1.0), name=nm),
        "ba/obj": lambda nm: hvd.allreduce(obj, name=nm),
        "ba/strs": lambda nm: hvd.allreduce(["a", "b"], name=nm),
        "ba/ragged": lambda nm: hvd.allreduce([[1.0], [1.0, 2.0]], name=nm),
        "ba/obj-ag": lambda nm: hvd.allgather(obj, name=nm),
        "ba/strs-ag": lambda nm: hvd.allgather(["a", "b"], name=nm),
        "ba/obj-bc": lambda nm: hvd.broadcast(obj, root_rank=0, name=nm),
        "ba/obj-a2a": lambda nm: hvd.alltoall(obj, name=nm),
        "ba/ragged-a2a": lambda nm: hvd.alltoall([[1.0], [1.0, 2.0]], name=nm),
        "ba/obj-rs": lambda nm: hvd.reducescatter(obj, name=nm),
        "ba/obj-grp": lambda nm: hvd.grouped_allreduce([x, obj], name=nm),
        "ba/out-list": lambda nm: hvd.allreduce(x, name=nm, out=[0.0] * 4),
        "ba/out-strided": lambda nm: hvd.allreduce(x, name=nm, out=np.zeros(8)[::2]),
        "ba/out-size": lambda nm: hvd.allreduce(x, name=nm, out=np.zeros(3)),
        "ba/out-dtype": lambda nm: hvd.allreduce(x, name=nm, out=np.zeros(4, np.float32)),
    }
    for nm, fn in cases.items():
        expect_named(lambda: fn(nm), f"'{nm}")
    for bad in (5, b"ba/bytes", 1.5):
        expect_named(lambda: hvd.allreduce(x, name=bad), "name", repr(bad))
        expect_named(lambda: hvd.grouped_allreduce([x], name=bad), "name", repr(bad))
    # Legal spellings: numpy integers and floats, ints as scale factors, int64-sized splits.
    got = hvd.broadcast(np.full(2, r + 1.0), root_rank=np.int64(n - 1), name="ba/ok/root")
    assert (got == n).all(), got
    got = hvd.allreduce(
        np.ones(2),
        op=hvd.Sum,
        name="ba/ok/scale",
        prescale_factor=np.float32(2),
        postscale_factor=3,
    )
    assert (got == 6 * n).all(), got
    got, recv = hvd.alltoall(
        np.arange(n, dtype=np.float32), splits=np.ones(n, np.uint8), name="ba/ok/splits"
    )
    assert list(recv) == [1] * n and got.tolist() == [float(r)] * n, (got, recv)
    assert named_splits("ba/ok/max", [2**63 - 1, -1]) == [2**63 - 1, -1]
    # Splits are 1-D, one per rank: a [1, n] array is not read as n splits.
    expect_named(lambda: named_splits("ba/2d", np.ones((1, n), np.int32)), "'ba/2d'", "1-D")
    # The engine is unaffected by all of the above.
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name="ba/after") == n).all()


def raises(exc, fn):
    try:
        fn()
    except exc as e:
        return e
    raise AssertionError(f"expected {exc.__name__}")


def sc_threads():
    """Concurrent synchronize() of one handle: one waiter gets the result, the other a clear
    error. A timed-out synchronize() can be repeated."""
    r, n = hvd.rank(), hvd.size()
    # 'th/<r>' completes only once every rank has submitted it, which the others do only after
    # the barrier below, which this rank joins only after both threads have tried.
    h = hvd.allreduce_async(np.full(3, r + 1.0), op=hvd.Sum, name=f"th/{r}")
    results = [None, None]

    def waiter(k):
        try:
            results[k] = ("ok", hvd.synchronize(h))
        except Exception as e:  # noqa: BLE001 - recorded and checked below
            results[k] = ("error", e)

    threads = [threading.Thread(target=waiter, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: any(x is not None for x in results), "the second waiter's error")
    loser = [x for x in results if x is not None][0]
    assert loser[0] == "error" and isinstance(loser[1], ValueError), loser
    assert f"'th/{r}'" in str(loser[1]) and "already being synchronized" in str(loser[1]), loser
    hvd.allreduce(np.ones(1), name="th/barrier")
    others = [
        hvd.allreduce_async(np.full(3, r + 1.0), op=hvd.Sum, name=f"th/{q}")
        for q in range(n)
        if q != r
    ]
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a waiter hung"
    winners = [x for x in results if x[0] == "ok"]
    assert len(winners) == 1, results
    assert winners[0][1].tolist() == [n * (n + 1) / 2] * 3, winners
    for o in others:
        hvd.synchronize(o)
    expect_named(lambda: hvd.synchronize(h), f"'th/{r}'", "already synchronized")

    # Timeouts, from this thread and then another, leave the handle usable.
    h = hvd.allreduce_async(np.full(2, r + 1.0), op=hvd.Sum, name=f"to/{r}")
    try:
        hvd.synchronize(h, timeout=0.2)
        raise AssertionError("no timeout")
    except TimeoutError as e:
        assert f"to/{r}" in str(e), e
    box = []
    t = threading.Thread(
        target=lambda: box.append(raises(TimeoutError, lambda: hvd.synchronize(h, timeout=0.2)))
    )
    t.start()
    t.join(timeout=60)
    assert box and f"to/{r}" in str(box[0]), box
    assert hvd.poll(h) is False
    expect_named(lambda: hvd.synchronize(h, timeout="soon"), f"'to/{r}'", "timeout")
    hvd.allreduce(np.ones(1), name="to/barrier")
    others = [
        hvd.allreduce_async(np.full(2, r + 1.0), op=hvd.Sum, name=f"to/{q}")
        for q in range(n)
        if q != r
    ]
    assert hvd.synchronize(h).tolist() == [n * (n + 1) / 2] * 2
    for o in others:
        hvd.synchronize(o)


def sc_blocking_calls():
    """hvd.allreduce and hvd.grouped_allreduce on plain arrays go to the binding in one call
    (queue and wait): the same results as the handle path, with `out` given, in place or not,
    every op and scale; anything else (an int factor, a list, a strided view) takes the
    checked path and agrees too."""
    r, n = hvd.rank(), hvd.size()
    for dt in (np.float32, np.int32, np.float16, np.float64):
        x = (np.arange(10) % 7 + r).astype(dt)
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max):
            if op == hvd.Average and np.issubdtype(dt, np.integer):
                continue
            for pre, post in ((1.0, 1.0), (2.0, 0.5), (3, 1)):
                if np.issubdtype(dt, np.integer) and (pre, post) != (1.0, 1.0):
                    continue
                nm = f"bc/{np.dtype(dt).name}/{op}/{pre}"
                kw = dict(op=op, prescale_factor=pre, postscale_factor=post)
                want = hvd.synchronize(hvd.allreduce_async(x, name=nm + "/h", **kw))
                got = hvd.allreduce(x, name=nm, **kw)
                assert got.dtype == dt and np.array_equal(got, want), (nm, got, want)
                out = np.empty_like(x)
                assert hvd.allreduce(x, name=nm + "/o", out=out, **kw) is out
                assert np.array_equal(out, want), (nm, out, want)
                y = x.copy()
                assert hvd.allreduce(y, name=nm + "/i", out=y, **kw) is y
                assert np.array_equal(y, want), (nm, y, want)
    strided = np.arange(20, dtype=np.float64)[::2] + r
    got = hvd.allreduce(strided, op=hvd.Sum, name="bc/strided")
    assert np.array_equal(got, n * np.arange(0.0, 20.0, 2) + n * (n - 1) / 2), got
    parts = [np.full(3, r, np.float32), np.full((2, 2), r + 1, np.int64), np.ones(0)]
    for tensors in (parts, [p.tolist() for p in parts[:2]]):
        got = hvd.grouped_allreduce(tensors, op=hvd.Sum, name=f"bc/group{len(tensors)}")
        want = [n * (n - 1) / 2, n * (n + 1) / 2, None][: len(tensors)]
        assert len(got) == len(tensors)
        for g, w in zip(got, want):
            assert w is None and g.shape == (0,) or np.all(g == w), (got, want)
    assert hvd.grouped_allreduce([], name="bc/empty") == []
