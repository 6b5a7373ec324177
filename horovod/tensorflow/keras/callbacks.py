"""Keras callbacks for data-parallel model.fit (`hvd.callbacks.*`), with upstream's names and
semantics, derived from the Keras that tf.keras is (Keras 3, or tf_keras: flavour.py). Every
rank must run the same callbacks: most of them issue collectives.

Momentum correction: upstream scales an SGD optimizer's momentum by new_lr/old_lr for the one
batch where the learning rate changes. Keras 3 optimizers read `momentum` as a Python float
when the train step is traced, so a later change has no effect (and a change before the
first trace would stick for the whole run). `momentum_correction` is therefore accepted and
is a no-op here.
"""

import numpy as np
import tensorflow as tf

from horovod.common import basics as _b
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow.functions import allgather_object, broadcast_variables
from horovod.tensorflow.keras.flavour import keras, optimizer_variables, to_float


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts root_rank's model weights (trainable and not, e.g. batch-norm statistics) and
    optimizer variables to every rank at the end of the first training batch (upstream: by
    then the optimizer's slots exist), so all ranks continue from identical state. The first
    batch itself starts from each rank's own initialization. Random seed state (Keras 3's
    SeedGenerator variables, e.g. of Dropout) stays rank-local, so ranks keep drawing
    independent noise. local_variables (or register_local_var): weights to leave out as well,
    e.g. those of PartialDistributedOptimizer's local layers."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.local_variables = {id(v): v for v in (local_variables or [])}
        self.broadcast_done = False

    def register_local_var(self, var):
        """Leaves `var` out of the broadcast (upstream's API)."""
        self.local_variables[id(var)] = var

    def on_train_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        variables = [v for v in self.model.weights if id(v) not in self.local_variables]
        with tf.device(self.device):
            broadcast_variables(variables, self.root_rank)
            optimizer = self.model.optimizer
            slots = optimizer_variables(optimizer) if optimizer is not None else []
            if slots:
                broadcast_variables(slots, self.root_rank)
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the epoch-end metrics (the `logs` dict, training and validation) across ranks,
    in place, so History, the progress bar and checkpoints on every rank see the global
    values. Put it before callbacks that read the metrics (Keras runs callbacks in list
    order; its own History and progress bar come last). Per epoch: an allgather of the metric
    names (ranks that log different metrics get a FailedPreconditionError naming each rank's,
    on every rank), then one allreduce.

    Every rank must run the same number of steps per epoch. With shards of different sizes
    (docs/usage.md, "Uneven data") `fit` stalls, as upstream's does: a shorter rank's epoch-end
    exchange waits for the longer ranks, whose next gradient allreduce waits for it. Rank 0's
    stall inspector names both after HOROVOD_STALL_CHECK_TIME_SECONDS (60 s), as
    `tensor 'allgather_object.MetricAverageCallback.metrics.sizes' (ALLGATHER) has waited 60 s
    for rank [0] (submitted by [1])` and the gradient allreduces waiting for rank 1, and again
    every period; with HOROVOD_STALL_SHUTDOWN_TIME_SECONDS set, fit fails on every rank
    (tf.errors.AbortedError, "Horovod stall shutdown ...") and the job ends; without, it waits
    for ever. Pass every rank the same `steps_per_epoch` (e.g. the smallest shard's batch count,
    hvd.allreduce(batches, op=hvd.Min)), or leave this callback out, join after fit and average
    the metrics then. Joining at each epoch's end, which would let the shorter ranks feed the
    others' allreduces, is no fix: the joined ranks would not apply the longer ranks' last
    updates, so the ranks' weights and optimizer states would part until a broadcast, which a
    metric callback cannot make right (it does not know the rank-local variables of
    PartialDistributedOptimizer, nor the process set); and while a rank has joined only
    host-memory allreduces run, so GPU or sparse gradients would fail instead."""

    def __init__(self, device=""):
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch, logs=None):
        keys = sorted(k for k, v in (logs or {}).items() if np.ndim(v) == 0 and _is_number(v))
        # Every rank's names first, so that every rank takes the same branch below: averaged
        # by position, metrics must be the same everywhere.
        everyone = allgather_object(keys, name="MetricAverageCallback.metrics")
        if any(k != keys for k in everyone):
            raise tf.errors.FailedPreconditionError(None, None, _different_metrics(epoch, everyone))
        if not keys:
            return
        values = tf.constant([float(logs[k]) for k in keys], tf.float64)
        with tf.device(self.device):
            averaged = _ops._allreduce([values], _ops.Average, "MetricAverageCallback.logs")[0]
        for k, v in zip(keys, averaged.numpy()):
            logs[k] = float(v)


def _different_metrics(epoch, everyone):
    """The error for ranks logging different metrics: each group of ranks and its metrics."""
    groups = {}
    for rank, keys in enumerate(everyone):
        groups.setdefault(tuple(keys), []).append(rank)
    parts = []
    for keys, ranks in groups.items():
        who = f"ranks {ranks} log" if len(ranks) > 1 else f"rank {ranks[0]} logs"
        parts.append(f"{who} {list(keys)}")
    return (
        f"MetricAverageCallback: ranks log different metrics at the end of epoch {epoch}: "
        + "; ".join(parts)
        + " (every rank must log the same metrics for them to be averaged)"
    )


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets optimizer.learning_rate = initial_lr * multiplier(epoch) for
    start_epoch <= epoch < end_epoch (end_epoch=None: no end).

    staircase=True: set at the first batch of each epoch, with the integer epoch (a constant
    multiplier always uses this mode). staircase=False: set before every batch, with the
    fractional epoch `epoch + batch / steps_per_epoch`; steps_per_epoch defaults to Keras'
    params['steps']. Outside the range the learning rate is left as it is. Logs the current
    rate as logs['learning_rate'] at epoch end. momentum_correction: no-op (module doc)."""

    def __init__(
        self,
        initial_lr,
        multiplier,
        start_epoch=0,
        end_epoch=None,
        staircase=True,
        momentum_correction=True,
        steps_per_epoch=None,
    ):
        super().__init__()
        if initial_lr is None:
            raise ValueError("initial_lr is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            self.staircase = True
            self.multiplier = lambda epoch: multiplier

    def _autodetect_steps_per_epoch(self):
        steps = (self.params or {}).get("steps")
        if not steps:
            raise ValueError(
                f"{type(self).__name__}: could not detect the number of steps "
                "per epoch (a dataset of unknown size?); pass steps_per_epoch"
            )
        return steps

    def _in_range(self):
        return self.current_epoch >= self.start_epoch and (
            self.end_epoch is None or self.current_epoch < self.end_epoch
        )

    def _adjust_learning_rate(self, epoch):
        self.model.optimizer.learning_rate = self.initial_lr * self.multiplier(epoch)

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if not self._in_range():
            return
        if self.staircase:
            if batch == 0:
                self._adjust_learning_rate(self.current_epoch)
        else:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = to_float(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Gradual warmup (Goyal et al., "Accurate, Large Minibatch SGD", 2017) from initial_lr /
    size to initial_lr over warmup_epochs, per batch, as upstream computes it. Before batch b
    (0-based) of epoch e < warmup_epochs, with N = hvd.size() and S = steps_per_epoch:

        lr(e, b) = initial_lr / N * ((e + (b + 1) / S) * (N - 1) / warmup_epochs + 1)

    so the first batch runs at initial_lr / N * (1 + (N - 1) / (S * warmup_epochs)) and the
    last warmup batch (e = warmup_epochs - 1, b = S - 1) at exactly initial_lr. From epoch
    warmup_epochs on the callback no longer touches the rate (it stays initial_lr unless
    another callback changes it). With N = 1 the rate is initial_lr throughout. `initial_lr`
    is the already scaled target rate (e.g. 0.01 * size). steps_per_epoch defaults to Keras'
    params['steps']. verbose: print when warmup ends. momentum_correction: no-op (module doc).
    """

    def __init__(
        self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0
    ):
        def multiplier(epoch):
            # epoch is fractional (e + b / S); the extra 1 / S makes the rate reach round
            # values at each epoch's last batch, as upstream does.
            epoch += 1.0 / self.steps_per_epoch
            n = _b.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super().__init__(
            initial_lr,
            multiplier,
            start_epoch=0,
            end_epoch=warmup_epochs,
            staircase=False,
            momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch,
        )
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0:
            lr = to_float(self.model.optimizer.learning_rate)
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {lr:g}.")


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves the whole model (a `.keras` file) whenever `monitor` improves, on rank 0 only
    (the other ranks hold the same weights). Upstream leaves `filepath` to be set later
    (`callback.filepath = ...`); here it can also be passed. Use MetricAverageCallback before
    it so the monitored value is the global one."""

    def __init__(
        self, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch", filepath=None
    ):
        # Keras checks the extension at construction: a placeholder until filepath is set.
        super().__init__(
            filepath=filepath or "unset.keras",
            monitor=monitor,
            verbose=verbose,
            save_best_only=True,
            save_weights_only=False,
            mode=mode,
            save_freq=save_freq,
        )
        if filepath is None:
            self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint: set filepath (a .keras path) before fit()")
        super().on_train_begin(logs)

    def on_train_batch_end(self, batch, logs=None):
        if _b.rank() == 0:
            super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if _b.rank() == 0:
            super().on_epoch_end(epoch, logs)
