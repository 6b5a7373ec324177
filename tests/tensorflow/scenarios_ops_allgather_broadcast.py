"""allgather, grouped_allgather and broadcast: every dtype incl. bool x 1-3 dims, eager and in
a tf.function."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import MOVE_DTYPES, address, check, function, make
from tests.support.scenario import expect_error


def sc_allgather():
    r, n = hvd.rank(), hvd.size()
    tails = [(), (3,), (2, 4)]

    def rows(q, tail):  # differing first dims; rank 1 has none for 3-d inputs
        return (0 if q == 1 else q + 2) if len(tail) == 2 else q + 1

    cases = [(dt, tail) for dt in MOVE_DTYPES for tail in tails]
    inputs = [make(r, (rows(r, tail),) + tail, dt)[0] for dt, tail in cases]
    wants = [
        np.concatenate([make(q, (rows(q, tail),) + tail, dt)[1] for q in range(n)])
        for dt, tail in cases
    ]
    for i, ((dt, tail), x) in enumerate(zip(cases, inputs)):
        got = hvd.allgather(x, name=f"ag/{i}" if i % 2 else None)
        check(got, wants[i], dt, f"allgather eager {dt.name} {tail}")
    traced = function(lambda xs: [hvd.allgather(x) for x in xs])
    for call in range(2):
        for i, got in enumerate(traced(inputs)):
            check(got, wants[i], cases[i][0], f"allgather function {call} {cases[i]}")

    # grouped_allgather: mixed dtypes (one op per dtype), results in input order.
    specs = [
        (tf.float32, (3,)),
        (tf.bool, (2, 2)),
        (tf.int64, ()),
        (tf.float32, (2, 1, 2)),
        (tf.bfloat16, ()),
    ]
    xs = [make(r, (r + 1 + i % 2,) + s, dt, salt=i)[0] for i, (dt, s) in enumerate(specs)]
    wants = [
        np.concatenate([make(q, (q + 1 + i % 2,) + s, dt, salt=i)[1] for q in range(n)])
        for i, (dt, s) in enumerate(specs)
    ]
    for mode, outs in (
        ("eager", hvd.grouped_allgather(xs, name="gag")),
        ("unnamed", hvd.grouped_allgather(xs)),
        ("function", function(hvd.grouped_allgather)(xs)),
    ):
        for i, ((dt, _s), got) in enumerate(zip(specs, outs)):
            check(got, wants[i], dt, f"grouped_allgather {mode} #{i}")
    sc_allgather_host_block()


def sc_allgather_host_block():
    """A CPU allgather's output is a kept host block (csrc/tensorflow/output_block.cc): from 4
    MiB on it starts on a 2 MiB page, the next call writes into the same block once the last
    output is gone, and never while it lives: a held output keeps its values."""
    r, n = hvd.rank(), hvd.size()
    rows = 3 << 18  # 3 MiB of float32 from each rank: the output is 6 MiB and up

    def gathered(value):
        return hvd.allgather(tf.fill([rows], float(value + r)), name="ag/block")

    def one_call(value):  # returns only the address: the output dies with the call
        out = gathered(value)
        want = np.concatenate([np.full(rows, value + q) for q in range(n)])
        check(out, want, tf.float32, f"allgather into a kept block, call {value}")
        return address(out)

    calls = [one_call(v) for v in range(3)]
    assert calls[0] % (2 << 20) == 0, f"output of {n * 3} MiB at {calls[0]:#x}, not on a 2 MiB page"
    assert calls[1] == calls[0] and calls[2] == calls[0], f"block not reused: {calls}"
    held = gathered(10)
    again = gathered(20)
    assert address(again) != address(held), "a live output's block was handed out again"
    for got, value in ((held, 10), (again, 20)):
        want = np.concatenate([np.full(rows, value + q) for q in range(n)])
        check(got, want, tf.float32, f"allgather output {value} after the next call")


def sc_broadcast():
    r, n = hvd.rank(), hvd.size()
    cases = [
        (dt, shape, root)
        for dt in MOVE_DTYPES
        for shape in ((4,), (3, 2), (2, 2, 3))
        for root in range(n)
    ]
    inputs = [make(r, shape, dt)[0] for dt, shape, root in cases]
    wants = [make(root, shape, dt)[1] for dt, shape, root in cases]
    for i, ((dt, shape, root), x) in enumerate(zip(cases, inputs)):
        got = hvd.broadcast(x, root_rank=root, name=f"bc/{i}" if i % 2 else None)
        check(got, wants[i], dt, f"broadcast eager {dt.name} {shape} root {root}")
    traced = function(lambda xs: [hvd.broadcast(x, c[2]) for x, c in zip(xs, cases)])
    for call in range(2):
        for i, got in enumerate(traced(inputs)):
            check(got, wants[i], cases[i][0], f"broadcast function {call} {cases[i]}")
    # Large, from the last rank, and a temporary input (its buffer may be forwarded).
    x, _ = make(r, (300001,), tf.float32)
    want = make(n - 1, (300001,), tf.float32)[1]
    check(hvd.broadcast(x * 1, root_rank=n - 1, name="bc/big"), want, tf.float32, "broadcast big")
    check(
        function(lambda t: hvd.broadcast(t * 1, n - 1))(x),
        want,
        tf.float32,
        "broadcast big function temporary",
    )
    # root_rank may be a NumPy integer; a non-integer fails the op on every rank, named.
    check(
        hvd.broadcast(x[:3], np.int64(0)),
        make(0, (300001,), tf.float32)[1][:3],
        tf.float32,
        "numpy root",
    )
    expect_error(
        lambda: hvd.broadcast(x, 0.5), tf.errors.InvalidArgumentError, "root_rank", "got 0.5"
    )
