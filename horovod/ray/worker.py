"""The worker: one Ray actor is one rank (upstream 0.28.1's BaseHorovodWorker).

The driver (horovod/ray/runner.py) creates the actors, tells each its rank's variables
(update_env_vars) and then runs functions in them (execute). `fn` runs in the actor's own
process, so what one run leaves there (modules, globals, the executable object) is there for
the next, as upstream; so is the engine: `hvd.init()` in a later run is a no-op while it runs.
"""

import dataclasses
import os
import socket
import sys
import traceback

# What engine_state() answers.
ENGINE_FRESH = "fresh"  # never started in this process: hvd.init() will meet the peers
ENGINE_RUNNING = "running"
# Loaded but not running: shut down (by fn, or after a failure), and this process cannot init
# again; or never started by a function that only imported Horovod (the engine cannot tell the
# two apart, and new workers are right for both).
ENGINE_ENDED = "ended"


@dataclasses.dataclass
class StartArgs:
    """start()'s arguments, kept: every new set of actors is made with them again."""

    executable_cls: object = None
    executable_args: list = None
    executable_kwargs: dict = None
    extra_env_vars: dict = None


def _engine():
    """The engine's bindings if this process loaded them (a function that never imported
    Horovod leaves them unloaded, and asking must not load them)."""
    return sys.modules.get("horovod._core")


class BaseHorovodWorker:
    """A rank's actor. `executable` is the object start(executable_cls=...) made here."""

    executable = None

    def node_id(self):
        import ray

        return ray.get_runtime_context().get_node_id()

    def hostname(self):
        return socket.gethostname()

    def node_info(self):
        """(Ray node id, node IP, host name, pid): where this rank runs."""
        import ray

        return (
            self.node_id(),
            ray.util.get_node_ip_address(),
            socket.gethostname(),
            os.getpid(),
        )

    def get_gpu_ids(self):
        """The GPU ids Ray assigned to this actor."""
        import ray

        return ray.get_gpu_ids()

    def update_env_vars(self, env_vars):
        """Sets variables in the actor's process (before the engine reads them at init)."""
        os.environ.update({str(k): str(v) for k, v in env_vars.items()})

    def env_vars(self):
        return dict(os.environ)

    def start_executable(self, executable_cls=None, executable_args=None, executable_kwargs=None):
        """Makes executable_cls(*args, **kwargs) here, the object execute() passes to fn."""
        if executable_cls is not None:
            self.executable = executable_cls(*(executable_args or []), **(executable_kwargs or {}))

    def make_executable(self, executable_cls, executable_args, executable_kwargs):
        """start_executable as a record (see call)."""
        try:
            self.start_executable(executable_cls, executable_args, executable_kwargs)
        except Exception as e:
            self._end_engine()
            return error_record(e)
        return {"ok": True, "value": None}

    def engine_state(self):
        """ENGINE_FRESH, ENGINE_RUNNING or ENGINE_ENDED (see above)."""
        core = _engine()
        if core is None:
            return ENGINE_FRESH
        return ENGINE_RUNNING if core.is_initialized() else ENGINE_ENDED

    def execute(self, func):
        """func(self.executable). When it raises, this rank's engine is shut down first: the
        other ranks' pending and later collectives then fail at once naming this rank
        (HorovodShutdownError) instead of waiting for it."""
        try:
            return func(self.executable)
        except BaseException:
            self._end_engine()
            raise

    def call(self, func):
        """execute(func) as a record for the driver, which names the rank in its error:
        {"ok": True, "value": result}, or {"ok": False, "type": "module.QualName", "text":
        str(exc), "traceback": the worker's traceback, "exception": exc or None when it does
        not pickle}."""
        try:
            return {"ok": True, "value": self.execute(func)}
        except Exception as e:  # SystemExit/KeyboardInterrupt end the actor, as in Ray
            return error_record(e)

    def _end_engine(self):
        core = _engine()
        if core is not None and core.is_initialized():
            from horovod.common import basics

            basics.shutdown()


def error_record(exc):
    """The record of an exception; the exception itself only when it pickles and loads back
    (else the driver could not read the record at all)."""
    from ray import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
        kept = exc
    except Exception:
        kept = None
    kind = type(exc)
    exceptions = sys.modules.get("horovod.common.exceptions")
    return {
        "ok": False,
        "type": f"{kind.__module__}.{kind.__qualname__}",
        # A consequence of another rank's failure (a peer left), not a cause.
        "collateral": exceptions is not None and isinstance(exc, exceptions.HorovodInternalError),
        "text": str(exc),
        "traceback": "".join(traceback.format_exception(kind, exc, exc.__traceback__)),
        "exception": kept,
    }
