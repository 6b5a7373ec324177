"""`hvd.elastic` for TensorFlow 2 (eager): `run`, `TensorFlowKerasState` (a Keras model and its
optimizer) and `TensorFlowState` (a list of variables), both taking extra picklable values as
keyword arguments (`batch=0, epoch=0`) that become attributes.

`run` syncs the state from rank 0 and calls the function; on a failed collective it restores the
last commit and re-raises on a fixed world, or ends the ranks for the driver to relaunch under an
elastic launch (see horovod/common/elastic.py). A failed collective reaches Python as a
HorovodInternalError or as the TF error its kernel set: AbortedError (the engine shut down, e.g.
a peer exited) or InternalError naming Horovod; both are treated as a peer failure.
"""

import tensorflow as tf

from horovod.common import basics as _b
from horovod.common.elastic import ObjectState, State, run_fn  # noqa: F401  (hvd.elastic.State)
from horovod.common.exceptions import HorovodInternalError
from horovod.tensorflow.functions import broadcast_object, broadcast_variables


def _peer_failure(error):
    """The HorovodInternalError a TF error from a Horovod kernel stands for, or None."""
    if isinstance(error, tf.errors.AbortedError | tf.errors.InternalError) and (
        "horovod" in str(error).lower() or isinstance(error, tf.errors.AbortedError)
    ):
        return HorovodInternalError(str(error))
    return None


def _reset():
    """What a reset does to the engine in-process: nothing. The ranks stay the same on a fixed
    world, and an elastic launch re-forms the job by relaunching the processes instead."""


def run(func):
    """Decorator for the elastic training function `func(state, *args, **kwargs)`.

    Before each call the state is synced from rank 0 (so ranks that start with different values
    agree). `state.commit()` inside func saves a restore point. Do not call collectives in the
    decorated call itself (argument evaluation) apart from what func does: a rank that joins
    later would be syncing while the others run them."""
    return run_fn(func, _reset, translate_error=_peer_failure)


def _optimizer_variables(optimizer):
    # A property in Keras 3 and tf_keras' current optimizers, a method in legacy ones.
    if optimizer is None:
        return []
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def _require_eager(what):
    if not tf.executing_eagerly():
        raise NotImplementedError(
            f"{what} supports TensorFlow 2 eager execution only (tf.compat.v1 graphs and "
            "sessions are not supported)"
        )


class _VariablesSnapshot:
    """Host copies of variables, assigned back to the same variables (optimizer slots created
    after the snapshot are not touched by a restore)."""

    def __init__(self, variables):
        self._saved = [(v, v.numpy()) for v in variables]

    def restore(self):
        for variable, value in self._saved:
            variable.assign(value)

    def values(self):
        return [value for _, value in self._saved]

    @classmethod
    def of(cls, variables, values, what):
        """A snapshot of `values` for `variables` (an elastic resume's, from another process)."""
        if len(variables) != len(values):
            raise ValueError(
                f"{what}: the committed state has {len(values)} variables, this process's "
                f"model and optimizer have {len(variables)}: is every rank running the same code?"
            )
        snap = cls([])
        snap._saved = list(zip(variables, values, strict=True))
        return snap


class TensorFlowKerasState(ObjectState):
    """A Keras model, its optimizer (default: `model.optimizer`) and extra values (kwargs).

    sync() broadcasts rank 0's model weights, optimizer variables and extra values; commit()
    saves all of them in host memory; restore() assigns the last save back. The model must be
    built. An optimizer that has not created its variables yet is built for the model's
    trainable variables at sync, so every rank broadcasts the same list. `backend` is accepted
    for upstream compatibility (TF1 sessions) and unused."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        _require_eager("TensorFlowKerasState")
        if not getattr(model, "built", True):
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self.backend = backend
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=_b.rank, **kwargs)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._model_snapshot.restore()
        super().restore()

    def sync(self):
        self._build_optimizer()
        broadcast_variables(self.model.variables, root_rank=0)
        optimizer_variables = _optimizer_variables(self.optimizer)
        if optimizer_variables:
            broadcast_variables(optimizer_variables, root_rank=0)
        self._save_model()
        super().sync()

    def _snapshot(self):
        return {"objects": super()._snapshot(), "variables": self._model_snapshot.values()}

    def _load_snapshot(self, snapshot):
        self._build_optimizer()
        self._model_snapshot = _VariablesSnapshot.of(
            list(self.model.variables) + _optimizer_variables(self.optimizer),
            snapshot["variables"],
            "TensorFlowKerasState",
        )
        super()._load_snapshot(snapshot["objects"])

    def _build_optimizer(self):
        optimizer = self.optimizer
        if optimizer is not None and getattr(optimizer, "built", True) is False:
            if hasattr(optimizer, "build"):
                optimizer.build(self.model.trainable_variables)

    def _save_model(self):
        self._model_snapshot = _VariablesSnapshot(
            list(self.model.variables) + _optimizer_variables(self.optimizer)
        )


class TensorFlowState(ObjectState):
    """A list of tf.Variables and extra values (kwargs). TF2 eager only, so `variables` must be
    given (there is no global variable collection); `session` is accepted for upstream
    compatibility and must be None."""

    def __init__(self, variables=None, session=None, **kwargs):
        _require_eager("TensorFlowState")
        if session is not None:
            raise NotImplementedError("TensorFlowState: TF1 sessions are not supported")
        if not variables:
            raise ValueError(
                "TensorFlowState needs `variables` in TensorFlow 2 (there are no global "
                "variables in eager execution)"
            )
        self.variables = list(variables)
        self.session = None
        self._variables_snapshot = _VariablesSnapshot(self.variables)
        super().__init__(bcast_object=broadcast_object, get_rank=_b.rank, **kwargs)

    def save(self):
        self._variables_snapshot = _VariablesSnapshot(self.variables)
        super().save()

    def restore(self):
        self._variables_snapshot.restore()
        super().restore()

    def sync(self):
        broadcast_variables(self.variables, root_rank=0)
        self._variables_snapshot = _VariablesSnapshot(self.variables)
        super().sync()

    def _snapshot(self):
        return {"objects": super()._snapshot(), "variables": self._variables_snapshot.values()}

    def _load_snapshot(self, snapshot):
        self._variables_snapshot = _VariablesSnapshot.of(
            self.variables, snapshot["variables"], "TensorFlowState"
        )
        super()._load_snapshot(snapshot["objects"])


__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]
