"""Process sets in horovod.tensorflow (test_process_sets.py): every op with process_set=,
eagerly and in a tf.function, two sets at once, gradients, the tape, the Keras
DistributedOptimizer and broadcast_variables within a set; the rest of the world is untouched."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
import horovod.tensorflow.keras as hvd_keras
from tests.support.scenario import expect_error


def _my_set():
    """Even and odd ranks: two disjoint sets; returns (mine, the other)."""
    n, me = hvd.size(), hvd.rank()
    evens = hvd.add_process_set(list(range(0, n, 2)))
    odds = hvd.add_process_set(list(range(1, n, 2)))
    return (evens, odds) if me % 2 == 0 else (odds, evens)


def _ops_in(ps, x):
    """Every op of the set on x (a float32 [2] of this rank's value); the same code eagerly and
    traced."""
    return {
        "sum": hvd.allreduce(x, op=hvd.Sum, process_set=ps),
        "avg": hvd.allreduce(x, process_set=ps),
        "grouped": hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, process_set=ps),
        "gather": hvd.allgather(tf.reshape(x, [1, 2]), process_set=ps),
        "ggather": hvd.grouped_allgather([x], process_set=ps),
        "bcast": hvd.broadcast(x, root_rank=ps.ranks[-1], process_set=ps),
        "a2a": hvd.alltoall(tf.tile(x[:1], [len(ps.ranks)]), process_set=ps),
        "rs": hvd.reducescatter(tf.tile(x[:1], [2 * len(ps.ranks)]), op=hvd.Sum, process_set=ps),
        "size": hvd.size_op(ps.process_set_id),
        "included": hvd.process_set_included_op(ps.process_set_id),
    }


def _check(ps, got):
    ranks = ps.ranks
    vals = [float(q) for q in ranks]
    assert np.allclose(got["sum"], sum(vals)), got["sum"]
    assert np.allclose(got["avg"], sum(vals) / len(vals)), got["avg"]
    assert np.allclose(got["grouped"][1], 2 * sum(vals)), got["grouped"]
    assert np.allclose(got["gather"][:, 0], vals), got["gather"]
    assert np.allclose(got["ggather"][0][::2], vals), got["ggather"]
    assert np.allclose(got["bcast"], ranks[-1]), got["bcast"]
    assert np.allclose(got["a2a"], vals), got["a2a"]
    assert np.allclose(got["rs"], [sum(vals)] * 2), got["rs"]
    assert int(got["size"]) == len(ranks) and int(got["included"]) == 1


def sc_process_sets():
    mine, other = _my_set()
    x = tf.fill([2], float(hvd.rank()))
    _check(mine, _ops_in(mine, x))  # eager: unnamed ops, counter names per set
    fn = tf.function(lambda t: _ops_in(mine, t))
    for _ in range(2):
        _check(mine, fn(x))
    assert int(hvd.process_set_included_op(other.process_set_id)) == 0
    expect_error(
        lambda: hvd.allreduce(x, name="ps/outside", process_set=other),
        tf.errors.InvalidArgumentError,
        f"rank {hvd.rank()} is not in process set {other.process_set_id}",
    )
    # upstream's test_horovod_allreduce_process_set_id_error: an id set by hand is a
    # ValueError before the op runs (issue 42, class 6; it was the op's InvalidArgumentError)
    fake = hvd.ProcessSet([0])
    fake.process_set_id = 10
    expect_error(
        lambda: hvd.allreduce(x, name="ps/fake", process_set=fake),
        ValueError,
        "no process set with id 10",
    )
    # gradients of the ops stay in the set: d(sum over set of allreduce-avg)/dx
    v = tf.Variable(tf.fill([2], float(hvd.rank())))
    with tf.GradientTape() as tape:
        y = hvd.allgather(tf.reshape(v, [1, 2]), process_set=mine)
        loss = tf.reduce_sum(y * tf.constant([[q + 1.0] * 2 for q in mine.ranks]))
    g = tape.gradient(loss, v)
    # every member's loss weighs this rank's row by (its global rank + 1); the allgather
    # gradient averages that over the set's members only
    assert np.allclose(g, hvd.rank() + 1.0), g
    # removal is collective: every rank removes the same set, in the same order
    first, second = sorted((mine, other), key=lambda ps: ps.process_set_id)
    assert hvd.remove_process_set(first) and hvd.remove_process_set(second)


def sc_process_sets_training():
    """A model trained by each set with its own data: weights equal within a set, different
    across sets; DistributedGradientTape, the Keras DistributedOptimizer and
    broadcast_variables all with process_set=."""
    mine, other = _my_set()
    tf.random.set_seed(hvd.rank())  # different initial weights everywhere
    w = tf.Variable(tf.random.normal([3, 1]))
    hvd.broadcast_variables([w], root_rank=mine.ranks[0], process_set=mine)
    rng = np.random.default_rng(100 + hvd.rank())
    opt = tf.keras.optimizers.SGD(0.1)
    dopt = hvd_keras.DistributedOptimizer(tf.keras.optimizers.SGD(0.1), process_set=mine)
    for step in range(4):
        xb = tf.constant(rng.normal(size=(8, 3)), tf.float32)
        yb = tf.constant(rng.normal(size=(8, 1)) + (mine.process_set_id * 5), tf.float32)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((xb @ w - yb) ** 2)
        if step % 2 == 0:
            tape = hvd.DistributedGradientTape(tape, process_set=mine)
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
        else:
            grads = tape.gradient(loss, [w])
            dopt.apply_gradients(zip(grads, [w]))
    mine_w = hvd.allgather(tf.reshape(w, [1, 3]), process_set=mine).numpy()
    assert np.allclose(mine_w, mine_w[0]), mine_w  # equal within the set
    every = hvd.allgather(tf.reshape(w, [1, 3])).numpy()
    assert not np.allclose(every[0], every[1]), every  # ranks 0 and 1: the sets trained apart
    first, second = sorted((mine, other), key=lambda ps: ps.process_set_id)
    assert hvd.remove_process_set(first) and hvd.remove_process_set(second)


def sc_process_sets_upstream():
    """Upstream's documented API as an upstream script spells it: a ProcessSet added after
    init (init(process_sets=...) is in the engine tests), hvd.global_process_set passed
    explicitly, rank()/size()/included() of a set."""
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.size() == hvd.size()
    ps = hvd.add_process_set(hvd.ProcessSet(range(hvd.size() - 1) if hvd.size() > 1 else [0]))
    if ps.included():
        out = hvd.allreduce(tf.constant(1.0), op=hvd.Sum, process_set=ps)
        assert float(out) == ps.size(), out
        assert 0 <= ps.rank() < ps.size()
    out = hvd.allreduce(tf.constant(1.0), op=hvd.Sum, process_set=hvd.global_process_set)
    assert float(out) == hvd.size()
    assert hvd.remove_process_set(ps)
    assert not hvd.remove_process_set(hvd.global_process_set)
