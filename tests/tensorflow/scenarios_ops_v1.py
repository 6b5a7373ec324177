"""The tf.compat.v1 graph path: DistributedOptimizer, BroadcastGlobalVariablesHook,
MonitoredTrainingSession, backward_passes_per_step. Each scenario disables eager execution
before it initializes Horovod, so it needs a process of its own."""

from types import SimpleNamespace

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import seed
from tests.support.scenario import manages_init


@manages_init
def sc_v1_graph():
    """The original Horovod example, in graph mode: hvd.DistributedOptimizer around a
    tf.compat.v1 optimizer, BroadcastGlobalVariablesHook in a MonitoredTrainingSession, a tiny
    linear model trained on each rank's shard. Ranks start from different weights; after the
    broadcast and every step they must hold identical weights, and the loss must fall."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(seed("v1", r))
    x_data = rng.uniform(-1, 1, (32, 2)).astype(np.float32)
    y_data = x_data @ np.array([[2.0], [-3.0]], np.float32) + 0.5
    x = v1.placeholder(tf.float32, [None, 2])
    y = v1.placeholder(tf.float32, [None, 1])
    w = v1.get_variable("w", [2, 1], initializer=v1.constant_initializer(float(r + 1)))
    b = v1.get_variable("b", [1], initializer=v1.constant_initializer(-float(r)))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    global_step = v1.train.get_or_create_global_step()
    opt = hvd.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.2))
    assert isinstance(opt, v1.train.Optimizer)
    train_op = opt.minimize(loss, global_step=global_step)
    weights = tf.concat([tf.reshape(w, [-1]), b], 0)
    gathered = hvd.allgather(tf.expand_dims(weights, 0))
    mean_loss = hvd.allreduce(loss, op=hvd.Average)
    feed = {x: x_data, y: y_data}
    losses = []
    hooks = [hvd.BroadcastGlobalVariablesHook(0)]
    with v1.train.MonitoredTrainingSession(hooks=hooks, checkpoint_dir=None) as sess:
        got = sess.run(gathered)
        assert (got == np.array([1.0, 1.0, 0.0], np.float32)).all(), (
            f"after the broadcast every rank should hold rank 0's weights: {got}"
        )
        for _ in range(40):
            _, current = sess.run([train_op, mean_loss], feed_dict=feed)
            losses.append(float(current))
            got = sess.run(gathered)
            assert all((got[q] == got[0]).all() for q in range(n)), f"weights differ: {got}"
        assert sess.run(global_step) == 40
    assert losses[-1] < 0.01 * losses[0], f"loss did not fall: {losses[0]} -> {losses[-1]}"
    assert all(b_ <= a_ * 1.0001 for a_, b_ in zip(losses, losses[1:])), losses


@manages_init
def sc_v1_accumulate():
    """backward_passes_per_step=2 on the tf.compat.v1 path (graph mode, MonitoredTrainingSession,
    BroadcastGlobalVariablesHook(0)), for GradientDescent with average_aggregated_gradients
    False and True, and Momentum (slots created inside the cond's branch) with True. The model
    has dense weights and an embedding (tf.gather: IndexedSlices gradients). Each pass feeds
    every rank a batch of its own, so the window's passes differ. After every run of the train
    op, every rank's weights are identical and equal a float64 NumPy reference: unchanged after
    odd runs; after even ones updated by the sum (or mean) over the 2 passes of the ranks'
    mean gradients. Also: compute_gradients() returns local gradients (the embedding's still
    IndexedSlices); the accumulators and counter are non-trainable LOCAL_VARIABLES (so not
    broadcast); no allreduce op lies outside the cond; global_step counts every run."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    hvd.init()
    for kind, average in [("sgd", False), ("sgd", True), ("momentum", True)]:
        what = f"{kind}, average_aggregated_gradients={average}"
        with tf.Graph().as_default() as graph:
            model = _accumulating_model(graph, kind, average, what)
            _train_against_reference(model, kind, average, what)
    _check_global_variable_names()


# sc_v1_accumulate's backward_passes_per_step, learning rate, momentum, rows in a batch, and
# runs of the train op
_PASSES_PER_STEP, _LR, _MOMENTUM, _BATCH_ROWS, _RUNS = 2, 0.1, 0.9, 8, 6


def _batch(q, p):
    """Rank q's batch of pass p: inputs, embedding indices, targets."""
    rng = np.random.default_rng(seed("v1_accumulate", q, p))
    m = _BATCH_ROWS
    return rng.uniform(-1, 1, (m, 2)), rng.integers(0, 5, m), rng.uniform(-1, 1, (m, 1))


def _local_grads(params, q, p):
    """The gradients of rank q's loss at pass p for params [w, b, e], in float64."""
    w, b, e = params
    m = _BATCH_ROWS
    xs, idx, ys = _batch(q, p)
    res = xs @ w + b + e[idx] - ys
    de = np.zeros_like(e)
    np.add.at(de, idx, 2 / m * res)
    return [2 / m * xs.T @ res, 2 / m * res.sum(0), de]


def _accumulating_model(graph, kind, average, what):
    """The model and its accumulating DistributedOptimizer in `graph`, after checking what
    compute_gradients returns, the aggregation's LOCAL_VARIABLES and that no allreduce lies
    outside the cond."""
    v1 = tf.compat.v1
    r = hvd.rank()
    x = v1.placeholder(tf.float32, [None, 2])
    i = v1.placeholder(tf.int32, [None])
    y = v1.placeholder(tf.float32, [None, 1])
    w = v1.get_variable("w", [2, 1], initializer=v1.constant_initializer(float(r + 1)))
    b = v1.get_variable("b", [1], initializer=v1.constant_initializer(-float(r)))
    e = v1.get_variable("e", [5, 1], initializer=v1.constant_initializer(0.5 * r))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b + tf.gather(e, i) - y))
    global_step = v1.train.get_or_create_global_step()
    base = (
        v1.train.GradientDescentOptimizer(_LR)
        if kind == "sgd"
        else v1.train.MomentumOptimizer(_LR, _MOMENTUM)
    )
    opt = hvd.DistributedOptimizer(
        base, backward_passes_per_step=_PASSES_PER_STEP, average_aggregated_gradients=average
    )
    grads_and_vars = opt.compute_gradients(loss)
    grad_of = {v.name: g for g, v in grads_and_vars}
    assert isinstance(grad_of["e:0"], tf.IndexedSlices), what
    train_op = opt.apply_gradients(grads_and_vars, global_step=global_step)
    local = v1.local_variables()
    assert len(local) == 4 and not set(local) & set(v1.global_variables()), (what, local)
    assert not set(local) & set(v1.trainable_variables()), what
    assert {v.name for v in local} == {
        f"{opt.get_name()}/aggregation/{s}:0" for s in ("counter", "w", "b", "e")
    }, local
    outside = [o.name for o in graph.get_operations() if o.type == "HorovodAllreduce"]
    assert not outside, f"{what}: allreduce outside the cond: {outside}"
    flat = tf.concat([tf.reshape(t, [-1]) for t in (w, b, e)], 0)
    return SimpleNamespace(
        placeholders=(x, i, y),
        grad_w=grad_of["w:0"],
        train_op=train_op,
        global_step=global_step,
        gathered=hvd.allgather(tf.expand_dims(flat, 0)),
    )


def _train_against_reference(model, kind, average, what):
    """Runs the train op _RUNS times in a MonitoredTrainingSession, checking every rank's
    weights after each run against the float64 reference updated after every
    _PASSES_PER_STEP runs."""
    r, n = hvd.rank(), hvd.size()

    def feed(p):
        return dict(zip(model.placeholders, _batch(r, p)))

    params = [np.full((2, 1), 1.0), np.zeros(1), np.zeros((5, 1))]  # rank 0's
    velocity = [np.zeros_like(t) for t in params]
    hooks = [hvd.BroadcastGlobalVariablesHook(0)]
    with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks, checkpoint_dir=None) as sess:
        before = sess.run(model.gathered)
        want = np.concatenate([t.ravel() for t in params])
        assert (before == want).all(), f"{what}: after the broadcast: {before}"
        got = sess.run(model.grad_w, feed(0))
        assert np.allclose(got, _local_grads(params, r, 0)[0], rtol=1e-5, atol=1e-6), (
            f"{what}: compute_gradients should give the local gradient: {got.ravel()}"
        )
        window = []
        for p in range(_RUNS):
            sess.run(model.train_op, feed(p))
            window.append(
                [np.mean(g, 0) for g in zip(*[_local_grads(params, q, p) for q in range(n)])]
            )
            applied = len(window) == _PASSES_PER_STEP
            if applied:
                step = [sum(g) / (_PASSES_PER_STEP if average else 1) for g in zip(*window)]
                if kind == "momentum":
                    velocity = [_MOMENTUM * v + g for v, g in zip(velocity, step)]
                    step = velocity
                params = [t - _LR * g for t, g in zip(params, step)]
                window = []
            got = sess.run(model.gathered)
            _check_run(got, before, params, applied, f"{what}, run {p + 1}")
            assert sess.run(model.global_step) == p + 1, (what, p)
            before = got


def _check_run(got, before, params, applied, what):
    """Every rank's weights after a run (`got`, gathered) are equal, changed only if the run
    applied an update, and equal the reference `params`."""
    n = hvd.size()
    assert all((got[q] == got[0]).all() for q in range(n)), (
        f"{what}: weights differ across ranks: {got}"
    )
    assert (got[0] != before[0]).any() if applied else (got[0] == before[0]).all(), (
        f"{what}: changed={applied} expected: {before[0]} -> {got[0]}"
    )
    want = np.concatenate([t.ravel() for t in params])
    assert np.allclose(got[0], want, rtol=1e-5, atol=1e-6), f"{what}:\n got  {got[0]}\n want {want}"


def _check_global_variable_names():
    """Global variables (what checkpoints and the broadcast see) are named as without
    aggregation, also those the wrapped optimizer creates inside the cond (Adam's powers)."""
    v1 = tf.compat.v1
    names = []
    for passes_per_step in (1, _PASSES_PER_STEP):
        with tf.Graph().as_default():
            v = v1.get_variable("v", [3])
            with v1.name_scope("train"):
                opt = hvd.DistributedOptimizer(
                    v1.train.AdamOptimizer(0.1), backward_passes_per_step=passes_per_step
                )
                opt.minimize(tf.reduce_sum(v * v))
            names.append(sorted(x.name for x in v1.global_variables()))
    assert names[0] == names[1] and "train/beta1_power:0" in names[0], names
