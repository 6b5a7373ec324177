"""hvd.elastic scenarios on a fixed world, run on every rank under mpirun by test_elastic.py.

Upstream-style elastic programs (model.fit with the three state callbacks, and a custom
DistributedGradientTape loop that commits every k batches) run as written for an elastic
launch; every rank starts from different weights, so equal weights afterwards show that
hvd.elastic.run synced them. Each rank prints "DIGEST <scenario> rank=<r> <what>=<sha256>"
for what must be equal across ranks (the test compares them) and "OK <scenario> rank=<r>".
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# Two cores are shared by all ranks: one thread per op keeps ranks from starving each other.
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras  # noqa: E402

import horovod.keras  # noqa: E402,F401  (horovod.keras.elastic is the same module)
import horovod.tensorflow as hvd_tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: E402
from tests.support import scenario  # noqa: E402
from tests.support.digests import digest, report  # noqa: E402


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def values(variables):
    return [v.numpy() for v in variables]


def opt_vars(optimizer):
    return list(optimizer.variables)


def rank_model():
    """A built model whose initial weights differ on every rank."""
    keras.utils.set_random_seed(100 + hvd.rank())
    return keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)]
    )


def rank_data(count):
    x = np.random.default_rng(7 + hvd.rank()).normal(size=(count, 8)).astype("float32")
    return x, (x @ np.linspace(-1, 1, 8, dtype="float32")[:, None]).astype("float32")


class CountingState(hvd.elastic.KerasState):
    """KerasState that counts its syncs and saves (commits), to check when run() calls them."""

    def __init__(self, *args, **kwargs):
        self.syncs = self.saves = 0
        super().__init__(*args, **kwargs)

    def sync(self):
        self.syncs += 1
        super().sync()

    def save(self):
        self.saves += 1
        super().save()


def sc_keras_fit():
    """Upstream's Keras elastic example, shrunk: fit once to build the optimizer, KerasState
    (batch=0, epoch=0), a reset callback, the three callbacks (commit every 2 batches), and
    @hvd.elastic.run train(state) fitting `3 - state.epoch` epochs of 4 batches. Ends with
    epoch 3, batch 0, 3 * 4 + 1 optimizer steps, one sync, and a commit every 2 batches and at
    each epoch's end; the committed state is the final one."""
    model = rank_model()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size(), momentum=0.9))
    model.compile(loss="mse", optimizer=opt)
    x, y = rank_data(32)
    model.fit(x[:8], y[:8], batch_size=8, epochs=1, verbose=0, shuffle=False)

    state = CountingState(model, batch=0, epoch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    callbacks = [
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=2),
    ]

    @hvd.elastic.run
    def train(state):
        state.model.fit(
            x,
            y,
            batch_size=8,
            epochs=3 - state.epoch,
            callbacks=callbacks,
            shuffle=False,
            verbose=0,
        )

    train(state)
    check(state.epoch == 3 and state.batch == 0, (state.epoch, state.batch))
    steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    check(steps == 13, f"optimizer steps {steps}")
    check(state.syncs == 1 and not resets, (state.syncs, resets))
    # Per epoch: commits after batches 2 and 4, and at the epoch's end.
    check(state.saves == 3 * 3, f"saves {state.saves}")
    final = values(model.variables) + values(opt_vars(model.optimizer))
    state.restore()
    check(
        digest(values(model.variables) + values(opt_vars(model.optimizer))) == digest(final),
        "restore() after the last commit changed the weights",
    )
    report("keras_fit", weights=digest(final), state=digest([state.epoch, state.batch]))


def sc_custom_loop():
    """Upstream's TF2 custom-loop elastic example, shrunk: TensorFlowKerasState(model, opt,
    batch=0) with an optimizer not yet built, a tf.function step with DistributedGradientTape,
    10 batches, commit every 3. Then an uncommitted step, and restore() returns the weights,
    optimizer variables and batch of the last commit (batch 9)."""
    model = rank_model()
    opt = keras.optimizers.Adam(0.01)
    loss = keras.losses.MeanSquaredError()
    x, y = rank_data(80)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)

    @tf.function
    def training_step(images, labels):
        with tf.GradientTape() as tape:
            loss_value = loss(labels, model(images, training=True))
        tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss_value, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss_value

    state = hvd_tf.elastic.TensorFlowKerasState(model, opt, batch=0)

    @hvd_tf.elastic.run
    def train(state):
        start_batch = state.batch
        for batch_idx, (images, labels) in enumerate(dataset.skip(state.batch).take(10)):
            state.batch = start_batch + batch_idx
            training_step(images, labels)
            if state.batch % 3 == 0:
                state.commit()

    train(state)
    check(state.batch == 9, f"batch {state.batch}")
    check(int(opt.iterations.numpy()) == 10, int(opt.iterations.numpy()))
    committed = values(model.variables) + values(opt_vars(opt))
    report("custom_loop", weights=digest(committed))

    images, labels = next(iter(dataset))
    training_step(images, labels)
    state.batch = 10
    check(digest(values(model.variables)) != digest(committed[: len(model.variables)]), "no step")
    state.restore()
    check(state.batch == 9, f"restored batch {state.batch}")
    check(digest(values(model.variables) + values(opt_vars(opt))) == digest(committed), "restore")


def sc_restore():
    """commit() then changes then restore(): the committed weights, optimizer variables and
    extra values come back (KerasState and TensorFlowState); restore without a commit returns
    to the construction-time values."""
    model = rank_model()
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    opt.build(model.trainable_variables)
    state = hvd.elastic.KerasState(model, opt, epoch=1, note="a")
    state.commit()
    saved = values(model.variables) + values(opt_vars(opt))
    for v in model.variables + opt_vars(opt):
        v.assign(tf.ones_like(v) * 5)
    state.epoch, state.note = 4, "b"
    state.restore()
    check(digest(values(model.variables) + values(opt_vars(opt))) == digest(saved), "keras")
    check((state.epoch, state.note) == (1, "a"), (state.epoch, state.note))

    v = tf.Variable([1.0, 2.0])
    tstate = hvd_tf.elastic.TensorFlowState([v], step=0)
    v.assign([3.0, 4.0])
    tstate.step = 1
    tstate.restore()
    check(v.numpy().tolist() == [1.0, 2.0] and tstate.step == 0, (v.numpy(), tstate.step))
    v.assign([5.0, 6.0])
    tstate.step = 2
    tstate.commit()
    v.assign([0.0, 0.0])
    tstate.restore()
    check(v.numpy().tolist() == [5.0, 6.0] and tstate.step == 2, (v.numpy(), tstate.step))


def sc_sync():
    """sync() gives every rank rank 0's weights, optimizer variables (momentum made different
    per rank) and extra values, and makes them the restore point."""
    r = hvd.rank()
    model = rank_model()
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    opt.build(model.trainable_variables)
    for v in opt_vars(opt)[2:]:
        v.assign(tf.fill(v.shape, float(r + 1)))
    state = hvd.elastic.KerasState(model, opt, epoch=r, batch=10 * r)
    before = digest(values(model.variables))
    state.sync()
    check((state.epoch, state.batch) == (0, 0), (state.epoch, state.batch))
    after = values(model.variables) + values(opt_vars(opt))
    check(r == 0 or digest(values(model.variables)) != before, "sync left rank's weights")
    check(all(np.all(v.numpy() == 1.0) for v in opt_vars(opt)[2:]), "momentum not rank 0's")
    for v in model.variables:
        v.assign(tf.zeros_like(v))
    state.epoch = 9
    state.restore()
    check(digest(values(model.variables) + values(opt_vars(opt))) == digest(after), "restore")
    check(state.epoch == 0, state.epoch)

    v = tf.Variable(tf.fill([3], float(r)))
    tstate = hvd_tf.elastic.TensorFlowState([v], step=r)
    tstate.sync()
    check(v.numpy().tolist() == [0.0] * 3 and tstate.step == 0, (v.numpy(), tstate.step))
    report("sync", weights=digest(after))


def sc_internal_error():
    """A HorovodInternalError inside the function (a peer failed): every rank restores the last
    commit and re-raises at once (nothing waits) with a message naming the elastic launch and
    --min-np; TF's AbortedError from a Horovod kernel counts as one; other errors pass
    through untouched, without a restore."""
    model = rank_model()
    state = CountingState(model, keras.optimizers.SGD(0.1), epoch=0)
    calls = []

    def make(exc):
        @hvd.elastic.run
        def train(state):
            calls.append(1)
            state.epoch = 1
            state.commit()
            for v in state.model.variables:
                v.assign(tf.ones_like(v) * 7)
            state.epoch = 2
            raise exc

        return train

    for exc in (
        HorovodInternalError("peer 1 is gone"),
        tf.errors.AbortedError(None, None, "Horovod has been shut down"),
    ):
        calls.clear()
        msg = scenario.expect_error(
            lambda e=exc: make(e)(state), HorovodInternalError, "elastically", "--min-np"
        )
        check(len(calls) == 1, f"called {len(calls)} times: {msg}")
        check(state.epoch == 1, f"epoch {state.epoch} not restored")
        check(all(np.all(v.numpy() != 7) for v in model.variables), "weights not restored")
    committed = digest(values(model.variables))
    report("internal_error", weights=committed)

    scenario.expect_error(lambda: make(ValueError("user bug"))(state), ValueError, "user bug")
    check(state.epoch == 2, "a user error restored the state")


def sc_hosts_updated():
    """A HostsUpdatedInterrupt (never raised by a fixed world itself) keeps the state as it is
    (no restore: uncommitted weight changes survive), runs the reset callbacks, and calls the
    function again after a sync, which, as upstream, re-broadcasts the extra values' last
    commit; with skip_sync=True it calls again without a sync, so they survive too."""
    model = rank_model()
    for skip_sync, syncs, epochs in ((False, 2, [0, 0]), (True, 1, [0, 5])):
        state = CountingState(model, keras.optimizers.SGD(0.1), epoch=0)
        resets, seen = [], []
        state.register_reset_callbacks([lambda s=state: resets.append(s.epoch)])

        @hvd.elastic.run
        def train(state, skip_sync=skip_sync):
            seen.append(state.epoch)
            if len(seen) == 1:
                state.epoch = 5  # not committed
                for v in state.model.variables:
                    v.assign(tf.fill(v.shape, 3.0))
                raise HostsUpdatedInterrupt(skip_sync)
            check(all(np.all(v.numpy() == 3.0) for v in state.model.variables), "restored")
            return "done"

        check(train(state) == "done", "return value")
        check(seen == epochs and resets == [5], (skip_sync, seen, resets))
        check(state.syncs == syncs, f"skip_sync={skip_sync}: {state.syncs} syncs")
    report("hosts_updated", weights=digest(values(model.variables)))


def sc_peer_shutdown():
    """A real peer failure: the last rank shuts its engine down inside the function while the
    others start an allreduce. Theirs fails (the engine ends pending ops when a rank shuts
    down); hvd.elastic.run restores their last commit and re-raises, naming the elastic
    launch, instead of waiting. Run last: the engine is shut down afterwards."""
    model = rank_model()
    state = hvd.elastic.KerasState(model, keras.optimizers.SGD(0.1), epoch=0)
    last = hvd.size() - 1

    @hvd.elastic.run
    def train(state):
        state.epoch = 1
        state.commit()
        if hvd.rank() == last:
            hvd.shutdown()
            return
        for v in state.model.variables:
            v.assign(tf.ones_like(v) * 7)
        state.epoch = 2
        hvd.allreduce(tf.ones([4]), name="after_peer_left")

    if hvd.rank() == last:
        train(state)
        return
    scenario.expect_error(lambda: train(state), HorovodInternalError, "elastically", "--min-np")
    check(state.epoch == 1, f"epoch {state.epoch} not restored")
    check(all(np.all(v.numpy() != 7) for v in model.variables), "weights not restored")


SCENARIOS = scenario.collect(sys.modules[__name__])

if __name__ == "__main__":
    scenario.main(SCENARIOS, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown)
