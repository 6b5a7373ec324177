"""allreduce and grouped_allreduce: every reduce dtype x 1-3 dims x reduce op, eager and in a
tf.function; scale factors, temporaries, average=, rejected dtypes."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import (
    OPS,
    REDUCE_DTYPES,
    SHAPES,
    address,
    check,
    function,
    make,
    reference,
)


def sc_allreduce():
    r, n = hvd.rank(), hvd.size()
    cases = [(dt, shape, op) for dt in REDUCE_DTYPES for shape in SHAPES for op in OPS]
    inputs = [make(r, shape, dt, op) for dt, shape, op in cases]
    wants = [
        reference([make(q, shape, dt, op)[1] for q in range(n)], op, dt) for dt, shape, op in cases
    ]
    # Scale factors (floats): each rank's input times prescale, reduced, times postscale.
    scaled = [
        (dt, shape, op)
        for dt in REDUCE_DTYPES
        if dt.is_floating
        for shape in ((17,), (40, 30, 30))
        for op in ("sum", "average")
    ]
    scaled_in = [make(r, shape, dt, salt=1) for dt, shape, op in scaled]
    scaled_want = [
        reference([make(q, shape, dt, salt=1)[1] * 0.5 for q in range(n)], op, dt) * 3.0
        for dt, shape, op in scaled
    ]

    def what(i, mode):
        dt, shape, op = cases[i]
        return f"allreduce {mode} {dt.name} {shape} {op}"

    for i, ((dt, _shape, op), (x, exact)) in enumerate(zip(cases, inputs)):
        got = hvd.allreduce(x, op=OPS[op], name=f"ar/{i}" if i % 2 else None)
        check(got, wants[i], dt, what(i, "eager"))
        check(x, exact, dt, what(i, "eager input intact"))
    for (dt, shape, op), (x, _), want in zip(scaled, scaled_in, scaled_want):
        got = hvd.allreduce(x, op=OPS[op], prescale_factor=0.5, postscale_factor=3.0)
        check(got, want, dt, f"allreduce eager scaled {dt.name} {shape} {op}")
    # A temporary input (in a graph, an intermediate nothing else reads): the kernel may
    # forward its buffer to the output and reduce in place.
    in_graph = function(lambda t: hvd.allreduce(t + tf.zeros_like(t), op=hvd.Sum))
    for dt in (tf.float32, tf.int32):
        x, exact = make(r, (40, 30, 30), dt)
        want = reference([make(q, (40, 30, 30), dt)[1] for q in range(n)], "sum", dt)
        got = hvd.allreduce(x + tf.zeros_like(x), op=hvd.Sum, name=f"ar/forwarded/{dt.name}")
        check(got, want, dt, "allreduce eager temporary")
        check(in_graph(x), want, dt, "allreduce function temporary")
        check(x, exact, dt, "allreduce temporary: input intact")

    @function
    def reduce_all(xs, ys):
        plain = [hvd.allreduce(x, op=OPS[op]) for x, (_, _, op) in zip(xs, cases)]
        scaled_out = [
            hvd.allreduce(y, op=OPS[op], prescale_factor=0.5, postscale_factor=3.0)
            for y, (_, _, op) in zip(ys, scaled)
        ]
        return plain, scaled_out

    for call in range(2):  # the second call runs the same graph (same node names) again
        plain, scaled_out = reduce_all([x for x, _ in inputs], [y for y, _ in scaled_in])
        for i, got in enumerate(plain):
            check(got, wants[i], cases[i][0], what(i, f"function call {call}"))
        for (dt, shape, op), got, want in zip(scaled, scaled_out, scaled_want):
            check(got, want, dt, f"allreduce function scaled {dt.name} {shape} {op}")
    for i, (x, exact) in enumerate(inputs):
        check(x, exact, cases[i][0], what(i, "function input intact"))

    # Deprecated average= flag, as upstream.
    x, _ = make(r, (5,), tf.float32)
    sums = reference([make(q, (5,), tf.float32)[1] for q in range(n)], "sum", tf.float32)
    check(hvd.allreduce(x, average=False), sums, tf.float32, "average=False")
    check(hvd.allreduce(x, average=True), sums / n, tf.float32, "average=True")
    check(hvd.allreduce(x), sums / n, tf.float32, "default op is Average")

    # Dtypes outside the op's set fail, naming the dtype (on every rank: see sc_dtypes).
    for bad in (tf.constant([True, False]), tf.constant([1 + 2j], tf.complex64)):
        try:
            hvd.allreduce(bad)
        except (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as e:
            assert bad.dtype.name in str(e), e
        else:
            raise AssertionError(f"allreduce accepted {bad.dtype.name}")
    sc_grouped_allreduce()


def sc_grouped_allreduce():
    """grouped_allreduce of mixed dtypes and shapes: results in input order, eager and traced."""
    r, n = hvd.rank(), hvd.size()
    specs = [
        (tf.float32, (7,)),
        (tf.int32, (3, 2)),
        (tf.float32, (40, 30, 30)),
        (tf.float16, (2, 2, 2)),
        (tf.float64, (1,)),
        (tf.int32, (5,)),
        (tf.bfloat16, (9,)),
    ]
    for op in ("sum", "average", "max"):
        xs = [make(r, s, dt, op, salt=i)[0] for i, (dt, s) in enumerate(specs)]
        wants = [
            reference([make(q, s, dt, op, salt=i)[1] for q in range(n)], op, dt)
            for i, (dt, s) in enumerate(specs)
        ]
        eager = hvd.grouped_allreduce(xs, op=OPS[op], name=f"grouped/{op}")
        unnamed = hvd.grouped_allreduce(xs, op=OPS[op])
        traced = function(lambda ts: hvd.grouped_allreduce(ts, op=OPS[op]))(xs)
        for mode, outs in (("eager", eager), ("unnamed", unnamed), ("function", traced)):
            assert len(outs) == len(specs)
            for i, ((dt, _s), got) in enumerate(zip(specs, outs)):
                check(got, wants[i], dt, f"grouped_allreduce {mode} {op} #{i}")
    sc_grouped_allreduce_one_block()


def sc_grouped_allreduce_one_block():
    """A CPU grouped_allreduce of one dtype (a step's gradients) takes its outputs as slices of
    one block (csrc/tensorflow/mpi_ops.cc): tensors above and below the ring's 16 KiB piece
    floor interleaved, sizes off the 64-byte alignment, an empty one. Every output is right,
    usable by TensorFlow's own kernels (which need 64-byte alignment), and the inputs intact."""
    r, n = hvd.rank(), hvd.size()
    shapes = [(4099,), (3,), (65, 70), (0,), (5000,), (1,), (17, 3, 7), (12289,), (16,)]
    for dt in (tf.float32, tf.float16, tf.float64, tf.int32):
        for op in ("sum", "average", "max"):
            if op == "average" and dt.is_integer:
                continue
            made = [make(r, s, dt, op, salt=i) for i, s in enumerate(shapes)]
            xs = [x for x, _ in made]
            wants = [
                reference([make(q, s, dt, op, salt=i)[1] for q in range(n)], op, dt)
                for i, s in enumerate(shapes)
            ]
            eager = hvd.grouped_allreduce(xs, op=OPS[op], name=f"block/{dt.name}/{op}")
            traced = function(lambda ts: hvd.grouped_allreduce(ts, op=OPS[op]))(xs)
            for mode, outs in (("eager", eager), ("function", traced)):
                for i, got in enumerate(outs):
                    what = f"grouped_allreduce one block {mode} {dt.name} {op} #{i} {shapes[i]}"
                    check(got, wants[i], dt, what)
                    # Through one of TensorFlow's Eigen kernels, which CHECK 64-byte alignment.
                    check(tf.maximum(got, got), wants[i], dt, what + " through a kernel")
            for i, (x, exact) in enumerate(made):
                check(x, exact, dt, f"grouped_allreduce one block {dt.name} {op} input #{i} intact")
    sc_grouped_allreduce_block_kept()


def sc_grouped_allreduce_block_kept():
    """The block (csrc/tensorflow/output_block.cc) is a kept host block: from 4 MiB on it starts
    on a 2 MiB page, the next step's call writes into the same block once the last step's outputs
    are gone, and never while one of them lives: a held output keeps its values."""
    r, n = hvd.rank(), hvd.size()
    if n < 2:  # one rank: outputs are the inputs' buffers, no block
        return
    shapes = [(5 << 18,), (1000,), (3,)]  # 5 MiB first in the block, the small ones after it

    def one_step(step):  # returns only addresses: the outputs die with the call
        outs = hvd.grouped_allreduce(
            [tf.fill(s, float(r + step)) for s in shapes], op=hvd.Sum, name="block/kept"
        )
        want = sum(q + step for q in range(n))
        for i, o in enumerate(outs):
            check(o, np.full(shapes[i], want), tf.float32, f"kept block step {step} #{i}")
        return [address(o) for o in outs]

    steps = [one_step(step) for step in range(3)]
    first = steps[0][0]
    assert first % (2 << 20) == 0, f"block of 5 MiB at {first:#x}, not on a 2 MiB page"
    assert steps[1] == steps[0] and steps[2] == steps[0], f"block not reused: {steps}"
    held = hvd.grouped_allreduce([tf.fill(s, 1.0) for s in shapes], op=hvd.Sum, name="block/kept")
    again = hvd.grouped_allreduce([tf.fill(s, 2.0) for s in shapes], op=hvd.Sum, name="block/kept")
    assert address(again[0]) != address(held[0]), "a live output's block was handed out again"
    for i, s in enumerate(shapes):
        check(held[i], np.full(s, n), tf.float32, f"held output #{i} after the next call")
        check(again[i], np.full(s, 2 * n), tf.float32, f"next call's output #{i}")
