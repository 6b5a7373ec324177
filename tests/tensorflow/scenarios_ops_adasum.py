"""op=hvd.Adasum in horovod.tensorflow (test_adasum.py): allreduce and grouped_allreduce
eagerly and in a tf.function against the NumPy reference of the tree (tests/support/reference.py),
DistributedGradientTape training, the tf.compat.v1 delta optimizer, and the refusals."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference import BF16, adasum, check, seed
from tests.support.scenario import expect_error, manages_init

DTYPES = [tf.float16, tf.float32, tf.float64] + ([tf.bfloat16] if BF16 else [])
SHAPES = [(1,), (7,), (1001,), (3, 5)]


def _np_dtype(dt):
    return BF16 if dt == tf.bfloat16 else np.dtype(dt.as_numpy_dtype)


def _input(q, shape, dt, salt=""):
    rng = np.random.default_rng(seed(f"adasum{salt}{shape}", q))
    return rng.uniform(-2, 2, shape).astype(_np_dtype(dt))


def _want(shape, dt, salt=""):
    nd = _np_dtype(dt)
    return adasum([_input(q, shape, dt, salt) for q in range(hvd.size())], nd)


def sc_adasum():
    r = hvd.rank()
    for dt in DTYPES:
        nd = _np_dtype(dt)
        for shape in SHAPES:
            x = tf.constant(_input(r, shape, dt), dt)
            for name in (None, f"tfad/{dt.name}/{shape}"):
                got = hvd.allreduce(x, op=hvd.Adasum, name=name)
                check(np.asarray(got.numpy()), _want(shape, dt), nd, f"eager {dt.name} {shape}")
    # A tf.function holding several Adasum ops and a grouped one (fused, each tensor on its
    # own), called twice.
    xs = [tf.constant(_input(r, s, tf.float32, "fn"), tf.float32) for s in SHAPES]

    @tf.function
    def step():
        single = [hvd.allreduce(x, op=hvd.Adasum) for x in xs]
        grouped = hvd.grouped_allreduce(xs, op=hvd.Adasum)
        return single, grouped

    for _ in range(2):
        single, grouped = step()
        for s, a, g in zip(SHAPES, single, grouped):
            want = _want(s, tf.float32, "fn")
            check(a.numpy(), want, np.dtype(np.float32), f"function {s}")
            check(g.numpy(), want, np.dtype(np.float32), f"function grouped {s}")
    got = hvd.grouped_allreduce(xs, op=hvd.Adasum, name="tfad/grouped")
    for s, g in zip(SHAPES, got):
        check(g.numpy(), _want(s, tf.float32, "fn"), np.dtype(np.float32), f"grouped {s}")


def sc_adasum_refused():
    """Integer dtypes and reducescatter fail on every rank, named; sparse gradients and Keras
    optimizers are refused as upstream refuses them; the next op works."""
    invalid = tf.errors.InvalidArgumentError
    expect_error(
        lambda: hvd.allreduce(tf.ones([3], tf.int32), op=hvd.Adasum, name="tfadr/int"),
        invalid,
        "tfadr/int",
        "allreduce with Adasum of int32 is not supported",
    )
    fn = tf.function(lambda: hvd.allreduce(tf.ones([3], tf.int64), op=hvd.Adasum))
    expect_error(fn, invalid, "allreduce with Adasum of int64 is not supported")
    expect_error(
        lambda: hvd.reducescatter(tf.ones([4]), op=hvd.Adasum, name="tfadr/rs"),
        invalid,
        "tfadr/rs",
        "reducescatter with Adasum is not supported",
    )
    slices = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([0, 2]), tf.constant([4, 3]))
    expect_error(
        lambda: hvd.allreduce(slices, op=hvd.Adasum), NotImplementedError, "sparse_as_dense=True"
    )
    import keras

    expect_error(
        lambda: hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd.Adasum),
        ValueError,
        "op == Adasum is not supported with Keras",
    )
    assert (hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy() == hvd.size()).all()


def sc_adasum_tape():
    """DistributedGradientTape(op=Adasum): the gradients are the Adasum of the ranks' local
    gradients (per variable), and a few SGD steps, eager and in a tf.function, leave identical
    weights on every rank. An IndexedSlices gradient needs sparse_as_dense=True, as upstream."""
    r, n = hvd.rank(), hvd.size()
    rng = np.random.default_rng(seed("adasum-tape", 0))
    w0 = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
    b0 = rng.uniform(-1, 1, (2,)).astype(np.float64)

    def data(q):
        g = np.random.default_rng(seed("adasum-tape", q + 1))
        return g.uniform(-1, 1, (8, 3)).astype(np.float32), g.uniform(-1, 1, (8, 2)).astype(
            np.float32
        )

    def loss_fn(w, b, xy):
        pred = tf.matmul(xy[0], w) + tf.cast(b, tf.float32)
        return tf.reduce_mean(tf.square(pred - xy[1]))

    for traced in (False, True):
        w, b = tf.Variable(w0), tf.Variable(b0)
        local = []
        for q in range(n):
            with tf.GradientTape() as tape:
                loss = loss_fn(w, b, data(q))
            local.append([g.numpy() for g in tape.gradient(loss, [w, b])])

        def step():
            with tf.GradientTape() as tape:
                loss = loss_fn(w, b, data(r))
            grads = hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [w, b])
            w.assign_sub(0.1 * grads[0])
            b.assign_sub(0.1 * grads[1])
            return grads

        step_fn = tf.function(step) if traced else step
        grads = step_fn()
        for i, nd in ((0, np.dtype(np.float32)), (1, np.dtype(np.float64))):
            want = adasum([local[q][i] for q in range(n)], nd)
            # Both come from float32 math (b's through a cast), traced or not: float32 tolerance.
            assert np.allclose(grads[i].numpy(), want, rtol=1e-5, atol=1e-6), (
                f"tape gradient {i} traced={traced}: {grads[i].numpy()} != {want}"
            )
        for _ in range(3):
            step_fn()
        weights = tf.concat([tf.reshape(w, [-1]), tf.cast(b, tf.float32)], 0)
        every = hvd.allgather(tf.expand_dims(weights, 0)).numpy()
        assert all((row == every[0]).all() for row in every), f"weights differ: {every}"
    emb = tf.Variable(tf.ones([5, 2]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(emb, [0, 3]))
    expect_error(
        lambda: hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [emb]),
        NotImplementedError,
        "sparse_as_dense=True",
    )
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(emb, [0, 3])) * (r + 1)
    dense = hvd.DistributedGradientTape(tape, op=hvd.Adasum, sparse_as_dense=True)
    got = dense.gradient(loss, [emb])[0].numpy()
    one = np.zeros((5, 2), np.float32)
    one[[0, 3]] = 1
    check(got, adasum([one * (q + 1) for q in range(n)], np.dtype(np.float32)), one.dtype, "dense")


def sc_adasum_not_power_of_two():
    """3 ranks: allreduce and the tape fail on every rank naming the rank count; the next op
    works."""
    n = hvd.size()
    invalid = tf.errors.InvalidArgumentError
    needle = f"power-of-two number of ranks, this job has {n}"
    expect_error(
        lambda: hvd.allreduce(tf.ones([4]), op=hvd.Adasum, name="tfadp/one"),
        invalid,
        "tfadp/one",
        needle,
    )
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * v)
    expect_error(
        lambda: hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [v]),
        invalid,
        needle,
    )
    assert (hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy() == n).all()


# The tf.compat.v1 delta optimizer's model: y = x w on each rank's data, plain SGD steps.
V1_W0 = np.array([[0.5], [-1.0]], np.float32)
V1_LR = 0.1


def _v1_data(q):
    g = np.random.default_rng(seed("v1-adasum", q))
    return g.uniform(-1, 1, (16, 2)).astype(np.float32), g.uniform(-1, 1, (16, 1)).astype(
        np.float32
    )


def _v1_combined(want, k):
    """The weights after one combination from `want` (float64): k local SGD steps on every
    rank's data, then want plus the Adasum of the ranks' deltas."""
    ends = []
    for q in range(hvd.size()):
        x, y = _v1_data(q)
        wq = want.astype(np.float32)
        for _ in range(k):
            wq = wq - V1_LR * (2 * x.T @ (x @ wq - y) / len(x))
        ends.append(wq.astype(np.float64) - want)
    return want + adasum(ends, np.dtype(np.float64))


def _v1_graph(k, w_init):
    """(graph, placeholders x and y, train op, allgathered weights) of the delta optimizer
    around GradientDescent with backward_passes_per_step=k."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 2])
        y = v1.placeholder(tf.float32, [None, 1])
        w = v1.get_variable("w", initializer=tf.constant(w_init), use_resource=True)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        opt = hvd.DistributedOptimizer(
            v1.train.GradientDescentOptimizer(V1_LR), op=hvd.Adasum, backward_passes_per_step=k
        )
        train = opt.minimize(loss)
        gathered = hvd.allgather(tf.reshape(w, [1, -1]))
    return graph, x, y, train, gathered


def _v1_train_and_check(sess, x, y, train, gathered, k, what):
    """Four runs of the train op from V1_W0; after each combination (every k-th run) every
    rank's weights are equal and match the NumPy reference."""
    want = V1_W0.astype(np.float64)
    feed = {x: _v1_data(hvd.rank())[0], y: _v1_data(hvd.rank())[1]}
    for step in range(1, 5):
        sess.run(train, feed_dict=feed)
        if step % k:
            continue
        want = _v1_combined(want, k)
        got = sess.run(gathered)
        assert all((row == got[0]).all() for row in got), f"{what}: {got}"
        assert np.allclose(got[0], want.ravel(), rtol=1e-4, atol=1e-5), (
            f"{what} step {step}: {got[0]} != {want.ravel()}"
        )


@manages_init
def sc_v1_adasum():
    """hvd.DistributedOptimizer(tf.compat.v1 optimizer, op=hvd.Adasum) in graph mode: each rank
    steps alone, and the steps (model deltas) are combined with Adasum, as upstream's delta
    optimizer: after one pass the weights are w0 + adasum(-lr g_q); with
    backward_passes_per_step=2, every second pass combines the two local steps since the last
    combination. Weights are identical on every rank after each combination."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    hvd.init()
    for k in (1, 2):
        graph, x, y, train, gathered = _v1_graph(k, V1_W0)
        with graph.as_default():
            init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
        with v1.Session(graph=graph) as sess:
            sess.run(init)
            _v1_train_and_check(sess, x, y, train, gathered, k, f"k={k}")


@manages_init
def sc_v1_adasum_global_init():
    """Issue 42: upstream's plain-session pattern, global_variables_initializer() alone then
    broadcast_global_variables(0), with the delta optimizer (backward_passes_per_step 1 and 2).
    Its counter and per-variable starts are GLOBAL_VARIABLES (non-trainable), as upstream's
    step_count and delta_start slots, so they are initialized and broadcast with the model;
    before, they were LOCAL_VARIABLES and the first run failed with FailedPreconditionError
    'Could not find variable .../aggregation/counter'. Ranks start from different weights;
    after the broadcast, training matches the NumPy reference from rank 0's."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    hvd.init()
    for k in (1, 2):
        what = f"global init only, k={k}"
        graph, x, y, train, gathered = _v1_graph(k, V1_W0 + hvd.rank())
        with graph.as_default():
            init = v1.global_variables_initializer()
            bcast = hvd.broadcast_global_variables(0)
        with v1.Session(graph=graph) as sess:
            sess.run(init)
            sess.run(bcast)
            _v1_train_and_check(sess, x, y, train, gathered, k, what)
        with graph.as_default():  # the counter and w's start
            own = [v for v in v1.global_variables() if "/aggregation/" in v.name]
            assert len(own) == 2 and not set(own) & set(v1.trainable_variables()), (what, own)
            assert not v1.local_variables(), (what, v1.local_variables())
