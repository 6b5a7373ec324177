"""DistributedGradientTape against the mean of the ranks' local gradients."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import seed

# Rank q's loss: mean((X_q w + b - Y_q)^2) + sum(emb[idx_q]^2 * k_q), with a float32 matrix w,
# a float64 bias b (a second dtype: a second grouped allreduce) and an embedding whose
# gradient is a tf.IndexedSlices. The reference is the mean over ranks of each rank's local
# gradient, all computed locally with a plain tf.GradientTape from every rank's data.


def _tape_data(q):
    rng = np.random.default_rng(seed("tape", q))
    return (
        tf.constant(rng.uniform(-1, 1, (4 + q, 3)), tf.float32),
        tf.constant(rng.uniform(-1, 1, (4 + q, 2)), tf.float32),
        tf.constant(rng.integers(0, 10, 5), tf.int32),  # with duplicates
        float(q + 1),
    )


def _tape_loss(w, b, emb, data):
    x, y, idx, k = data
    pred = tf.matmul(x, w) + tf.cast(b, tf.float32)
    return tf.reduce_mean(tf.square(pred - y)) + tf.reduce_sum(tf.square(tf.gather(emb, idx))) * k


def _dense(g):
    return tf.convert_to_tensor(g).numpy()


def sc_tape():
    r, n = hvd.rank(), hvd.size()
    w = tf.Variable(tf.reshape(tf.range(6, dtype=tf.float32) / 10, [3, 2]))
    b = tf.Variable(tf.constant([0.5, -0.5], tf.float64))
    emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float32) / 40, [10, 4]))
    variables = [w, b, emb]
    local = []
    for q in range(n):
        with tf.GradientTape() as tape:
            loss = _tape_loss(w, b, emb, _tape_data(q))
        local.append([_dense(g) for g in tape.gradient(loss, variables)])
    mean = [sum(gs[i] for gs in local) / n for i in range(3)]
    mine = _tape_data(r)

    def run(options, as_dict):
        with tf.GradientTape() as tape:
            loss = _tape_loss(w, b, emb, mine)
        tape = hvd.DistributedGradientTape(tape, **options)
        assert isinstance(tape, tf.GradientTape)
        if as_dict:  # nested sources come back in the same structure
            grads = tape.gradient(loss, {"w": w, "rest": (b, emb)})
            return [grads["w"], grads["rest"][0], grads["rest"][1]]
        return tape.gradient(loss, variables)

    variants = [
        ("default", {}, 1.0, 1e-6),
        ("sparse_as_dense", {"sparse_as_dense": True}, 1.0, 1e-6),
        ("predivide", {"gradient_predivide_factor": 2.0}, 1.0, 1e-6),
        ("num_groups", {"num_groups": 2}, 1.0, 1e-6),
        ("groups", {"groups": [[w, emb]]}, 1.0, 1e-6),
        ("fp16", {"compression": hvd.Compression.fp16}, 1.0, 1e-2),
        ("sum", {"op": hvd.Sum}, float(n), 1e-6),
    ]
    for name, options, scale, tol in variants:
        for traced in (False, True):
            for as_dict in (False, True) if name == "default" else (False,):
                fn = (
                    tf.function(lambda: run(options, as_dict))
                    if traced
                    else (lambda: run(options, as_dict))
                )
                grads = fn()
                what = f"tape {name} {'function' if traced else 'eager'} dict={as_dict}"
                assert grads[0].dtype == tf.float32 and grads[1].dtype == tf.float64, what
                sparse = isinstance(grads[2], tf.IndexedSlices)
                assert sparse == (name != "sparse_as_dense"), f"{what}: {type(grads[2])}"
                for i, g in enumerate(grads):
                    assert np.allclose(_dense(g), mean[i] * scale, rtol=tol, atol=tol), (
                        f"{what}: gradient #{i} {_dense(g).ravel()[:4]} != "
                        f"{(mean[i] * scale).ravel()[:4]}"
                    )
    # A gradient that is None (variable not used) stays None.
    unused = tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = _tape_loss(w, b, emb, mine)
    grads = hvd.DistributedGradientTape(tape).gradient(loss, [w, unused])
    assert grads[1] is None and np.allclose(grads[0].numpy(), mean[0], rtol=1e-6)
    # A few SGD steps on the averaged gradient keep the ranks' weights identical.
    opt = tf.keras.optimizers.SGD(0.1)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = _tape_loss(w, b, emb, mine)
        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=True)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    for v in variables:
        gathered = hvd.allgather(tf.expand_dims(v, 0)).numpy()
        assert all((gathered[q] == gathered[0]).all() for q in range(n)), v.name
