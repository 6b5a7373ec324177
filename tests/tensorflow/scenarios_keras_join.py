"""hvd.join() with uneven data (a subject module of the Keras scenario program,
scenarios_keras.py): Keras model.fit and a custom DistributedGradientTape loop end on every
rank, and after a broadcast from the rank join() names, every rank holds the same weights."""

import time

import keras
import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
from tests.support.digests import digest, report


def _data(rank, count):
    x = np.random.default_rng(50 + rank).normal(size=(count, 8)).astype("float32")
    return x, (x @ np.arange(8, dtype="float32")[:, None]).astype("float32")


def _model():
    keras.utils.set_random_seed(11)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])


def sc_join_fit():
    """Rank q holds 32 (q + 1) samples: model.fit (batch 16, one epoch) runs 2 (q + 1) steps, the
    last ones with fewer ranks; then join() returns the last rank on every rank, and a broadcast
    from it makes the weights equal. Before join existed, the longer ranks' last steps waited
    for ever for the others' allreduce."""
    r, n = hvd.rank(), hvd.size()
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
    x, y = _data(r, 32 * (r + 1))
    model.fit(
        x,
        y,
        batch_size=16,
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )
    steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    assert steps == 2 * (r + 1), steps
    last = hvd.join()
    assert last == n - 1, last
    hvd.broadcast_variables(model.variables, root_rank=last)
    report("join_fit", weights=digest(model.get_weights()))


def sc_join_tape():
    """The same with a custom loop: DistributedGradientTape in a tf.function, rank q runs
    3 + q steps; the gradient of a step is the sum over the ranks still running divided by
    the job's size (the joined ranks add zeros)."""
    r, n = hvd.rank(), hvd.size()
    w = tf.Variable(tf.zeros([8, 1]))
    x, y = _data(r, 8 * (3 + r))

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(xb @ w - yb))
        grad = hvd_tf.DistributedGradientTape(tape).gradient(loss, [w])[0]
        w.assign_sub(0.01 * grad)
        return grad

    data = [_data(q, 8 * (3 + q)) for q in range(n)]
    for k in range(3 + r):
        before = w.numpy()
        got = step(x[8 * k : 8 * k + 8], y[8 * k : 8 * k + 8]).numpy()
        live = [q for q in range(n) if k < 3 + q]
        # The joined ranks' zeros count in the average (upstream's, HOROVOD_JOIN_AVERAGE=set).
        want = (
            np.sum(
                [
                    2
                    / 8
                    * xq[8 * k : 8 * k + 8].T
                    @ (xq[8 * k : 8 * k + 8] @ before - yq[8 * k : 8 * k + 8])
                    for xq, yq in (data[q] for q in live)
                ],
                axis=0,
            )
            / n
        )
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4), (k, live, got.ravel(), want.ravel())
    last = hvd_tf.join()
    assert last == n - 1, last
    hvd_tf.broadcast_variables([w], root_rank=last)
    report("join_tape", weights=digest([w.numpy()]))


def sc_join_fit_metric_average_stalls():
    """Issue 54, class 13, as docs/usage.md ("Uneven data") states it: model.fit with shards of
    different sizes and MetricAverageCallback never reaches join(). Rank 0 runs 4 steps, the
    others 2; at their epoch's end the others' metric exchange (an allgather) waits for rank 0,
    whose third step's gradient allreduce waits for them. Launched alone under a small
    HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, fit fails on every rank with the stall shutdown (the
    test reads what the stall inspector logged; the job then ends with MPI_Abort)."""
    r = hvd.rank()
    model = _model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
    x, y = _data(r, 64 if r == 0 else 32)
    try:
        model.fit(
            x,
            y,
            batch_size=16,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[hvd.callbacks.MetricAverageCallback()],
        )
    except tf.errors.AbortedError as e:
        assert "Horovod stall shutdown" in str(e), e
        print(f"STALLED rank={r}", flush=True)
        time.sleep(1)  # the other ranks print theirs before this one's exit aborts the job
        return
    raise AssertionError(
        "model.fit returned: uneven shards with MetricAverageCallback no longer stall; "
        "update docs/usage.md ('Uneven data'), the callback's docstring and this scenario"
    )
