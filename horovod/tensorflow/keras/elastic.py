"""`hvd.elastic` for Keras (`horovod.tensorflow.keras.elastic`, also `horovod.keras.elastic`):
KerasState and the three callbacks that keep it current inside `model.fit`, plus `run` from
horovod/tensorflow/elastic.py. Fixed world only; see horovod/common/elastic.py.

Put UpdateBatchStateCallback and UpdateEpochStateCallback before CommitStateCallback in the
callback list, so that a commit saves the batch and epoch that were just finished.
"""

from horovod.tensorflow.elastic import TensorFlowKerasState, run
from horovod.tensorflow.keras.flavour import keras


class KerasState(TensorFlowKerasState):
    """A Keras model, its optimizer (default: the compiled one) and extra values (kwargs)."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, **kwargs)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits `state` after every `batches_per_commit` training batches and at every epoch's
    end. The count restarts at each fit(), so all ranks commit at the same batches."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps `state.batch` at the index of the last finished batch, 0 again after each epoch.
    When fit() has a `steps_per_epoch`, the first epoch is shortened by the batches `state`
    says were already done (after a reset that resumed mid-epoch)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        params = self.params or {}
        if params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = params["steps"]
            params["steps"] = self.steps_per_epoch - self.state.batch

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps `state.epoch` at the number of finished epochs over all fit() calls: Keras counts
    from 0 (or initial_epoch) in each fit(), so the count is offset by `state.epoch` at start."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        # +1: epoch `epoch` is finished, so a restart resumes with the next one.
        self.state.epoch = self.initial_epoch + epoch + 1


__all__ = [
    "KerasState",
    "CommitStateCallback",
    "UpdateBatchStateCallback",
    "UpdateEpochStateCallback",
    "run",
]
