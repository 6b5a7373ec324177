"""What ranks must agree on beyond one tensor (issue 17, classes 2, 3 and 7): a group's size,
ops given one name twice in a tf.function, and argument checks made on one rank only."""

import time

import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.scenario import expect_error

MISMATCH = tf.errors.FailedPreconditionError
INVALID = tf.errors.InvalidArgumentError


def _expect(tag, fn, exc, *needles):
    """fn() fails on this rank within seconds with every needle; the next op works."""
    start = time.monotonic()
    msg = expect_error(fn, exc, *needles)
    assert time.monotonic() - start < 30, f"{tag}: took {time.monotonic() - start:.1f} s"
    n = hvd.size()
    assert (hvd.allreduce(tf.ones([2]), op=hvd.Sum, name=f"{tag}/after").numpy() == n).all()
    return msg


def sc_group_sizes():
    """A variable created on rank 0 only: grouped_allreduce (eager, cached and new, and in a
    tf.function), grouped_allgather, broadcast_variables and DistributedGradientTape fail on
    every rank naming the group sizes. Before: rank 0's extra member waited while the other
    ranks returned. Mixed dtypes are one group (before: one op per dtype, so an extra int32
    tensor on one rank was an op the others never submitted)."""
    r, n = hvd.rank(), hvd.size()
    extra = r == 0
    sizes = ("group sizes", "rank [0] has 3 tensors", f"{list(range(1, n))} ha", "2 tensors")

    def tensors(count, dtype=tf.float32):
        return [tf.fill([3], tf.cast(i + 1, dtype)) for i in range(count)]

    for _ in range(2):  # cached: three members on every rank
        got = hvd.grouped_allreduce(tensors(3), op=hvd.Sum, name="ts/warm")
        assert [g.numpy().tolist() for g in got] == [[n * (i + 1.0)] * 3 for i in range(3)]
    for tag in ("ts/warm", "ts/cold"):
        _expect(
            tag,
            lambda: hvd.grouped_allreduce(tensors(2 + extra), op=hvd.Sum, name=tag),
            MISMATCH,
            f"group '{tag}'",
            *sizes,
        )
    mixed = [tf.ones([2]), tf.ones([2], tf.float64)] + ([tf.ones([2], tf.int32)] if extra else [])
    _expect("ts/mixed", lambda: hvd.grouped_allreduce(mixed, name="ts/mixed"), MISMATCH, *sizes)
    _expect(
        "ts/gather",
        lambda: hvd.grouped_allgather(tensors(2 + extra), name="ts/gather"),
        MISMATCH,
        *sizes,
    )
    fn = tf.function(lambda: hvd.grouped_allreduce(tensors(2 + extra), op=hvd.Sum))
    _expect("ts/function", fn, MISMATCH, *sizes)

    variables = [tf.Variable(tf.fill([2], float(r))) for _ in range(2 + extra)]
    _expect("ts/bcast", lambda: hvd.broadcast_variables(variables, 0), MISMATCH, *sizes)

    def tape_step():
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_sum(v * v) for v in variables])
        return hvd.DistributedGradientTape(tape).gradient(loss, variables)

    _expect("ts/tape", tape_step, MISMATCH, *sizes)
    _expect("ts/tape-fn", tf.function(tape_step), MISMATCH, *sizes)
    # Agreeing again, the same groups work.
    got = hvd.grouped_allreduce(tensors(3), op=hvd.Sum, name="ts/warm")
    assert [g.numpy().tolist() for g in got] == [[n * (i + 1.0)] * 3 for i in range(3)]


def sc_duplicate_names():
    """Two ops given the same name in one tf.function are two ops on every rank (TensorFlow
    makes their node names unique), each reduced with its namesake. Before: both were
    negotiated as "dup"; one was refused on each rank, and which one depended on the order each
    rank ran them, so a rank's result could be the sum of the peer's other tensor."""
    r, n = hvd.rank(), hvd.size()

    @tf.function
    def two(a, b):
        return hvd.allreduce(a, op=hvd.Sum, name="dup"), hvd.allreduce(b, op=hvd.Sum, name="dup")

    want_a, want_b = sum(range(n)), sum(100 + q for q in range(n))
    for _ in range(5):
        x, y = two(tf.fill([4], float(r)), tf.fill([4], 100.0 + r))
        assert (x.numpy() == want_a).all() and (y.numpy() == want_b).all(), (x, y)


def sc_one_rank_args():
    """An argument only rank 1 gets wrong (root_rank=0.0, an unknown reduce op, a prescale
    factor that is no number) fails the op on every rank with InvalidArgumentError naming
    rank 1 and the reason, eagerly and in a tf.function. Before: rank 1 raised alone and the
    others waited for its op."""
    r = hvd.rank()
    bad = r == 1
    cases = {
        "or/root": (
            lambda nm: hvd.broadcast(tf.ones([2]), 0.0 if bad else 0, name=nm),
            "root_rank must be an integer",
        ),
        "or/op": (
            lambda nm: hvd.allreduce(tf.ones([2]), op=12345 if bad else hvd.Sum, name=nm),
            "unknown reduce op",
        ),
        "or/pre": (
            lambda nm: hvd.allreduce(tf.ones([2]), prescale_factor="x" if bad else 1.0, name=nm),
            "prescale_factor must be a real number",
        ),
    }
    for nm, (body, reason) in cases.items():
        _expect(nm, lambda: body(nm), INVALID, nm, "on rank 1", reason)
        fn = tf.function(lambda: body(None))
        _expect(nm + "/fn", fn, INVALID, "on rank 1", reason)
