"""Exceptions raised when a collective fails. Every rank involved raises the same message."""

# What every API call before hvd.init() says (a ValueError).
NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."


class HorovodInternalError(RuntimeError):
    """A collective failed inside the engine."""


class HorovodMismatchError(HorovodInternalError):
    """Ranks disagreed about a tensor (op, dtype, shape, root rank, reduce op or scale factors).

    The message names the tensor, the field and the ranks on each side."""


class HorovodShutdownError(HorovodInternalError):
    """The engine is shut down: this rank or another one called shutdown() or exited, or the
    stall inspector shut it down (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)."""


class HostsUpdatedInterrupt(RuntimeError):
    """The set of hosts changed: hvd.elastic.run resets and calls its function again, keeping
    the state as it is (no restore); with `skip_sync` it skips the sync before that call.
    check_host_updates() raises it under an elastic launch (horovodrun --host-discovery-script),
    where hvd.elastic.run ends the ranks for the driver to relaunch on the new hosts."""

    def __init__(self, skip_sync=False):
        super().__init__(skip_sync)
        self.skip_sync = skip_sync
