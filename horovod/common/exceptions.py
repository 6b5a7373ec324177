"""Exceptions raised when a collective fails. Every rank involved raises the same message."""

# What every API call before hvd.init() says (a ValueError).
NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."


class HorovodInternalError(RuntimeError):
    """A collective failed inside the engine."""


class HorovodInvalidArgumentError(ValueError, RuntimeError):
    """Every rank refused the op: a rank's arguments were bad (the message names the tensor
    and the reason), or the op cannot run now (a rank has joined, or Adasum where it has no
    meaning). A ValueError, as a bad argument is in Python; also a RuntimeError, which is what
    upstream's torch frontend raises for an op the engine refused (`except RuntimeError` in
    code written for it keeps working). Not a HorovodInternalError: elastic training must not
    take a program's own mistake for a lost peer and retry it."""


class MixedDevicesError(TypeError, RuntimeError):
    """One call mixed host and device tensors (a group's members, or an input and its `out`),
    found by the frontend on this rank. A TypeError, as a wrong argument type is in Python; also
    a RuntimeError, which upstream's torch frontend raises for a group mixing CPU and GPU
    tensors (its test expects one). The other ranks raise HorovodInvalidArgumentError naming
    this rank, as for any argument refused on one rank."""


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
