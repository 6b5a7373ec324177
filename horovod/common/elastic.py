"""Elastic training state and its retry loop, framework-independent (upstream's
`horovod.common.elastic`). The TensorFlow and Keras frontends (horovod/tensorflow/elastic.py,
horovod/tensorflow/keras/elastic.py) build their `hvd.elastic` on this.

Under an elastic launch (`horovodrun --host-discovery-script ...`; elastic_worker.py says how
it works) a commit is also written to a memory-backed file on the rank's host, a failed peer or
a membership change ends the ranks for the driver to relaunch, and the next generation resumes
from the newest commit. The user's function sees only upstream's two exceptions; the code before
it runs again in each generation's new processes. Over TCP (`horovodrun --gloo`) a surviving
process instead re-forms in place (shutdown, its place from the driver, init) and resumes from
its commit in memory; only new slots run the code before the function.

Without the driver (plain `mpirun -np N` / `horovodrun -np N`) the world is FIXED: there is no
host-update notification to watch, `check_host_updates()` has nothing to detect, and a failed
peer cannot be replaced. `run_fn` then restores the last commit on a HorovodInternalError and
re-raises it, naming the elastic launch. A HostsUpdatedInterrupt raised by user code takes
upstream's path: keep the state, reset, run the reset callbacks, sync again unless told not to.
"""

import functools

from horovod.common import elastic_worker
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

FIXED_WORLD_FAILURE = (
    "a collective failed inside hvd.elastic.run ({error}); the state was restored to its last "
    "commit, but this job runs on a fixed set of ranks (plain mpirun/horovodrun -np N), so it "
    "cannot re-form without the failed peer: to go on with the ranks that remain, launch it "
    "elastically (horovodrun --min-np MIN --max-np MAX --host-discovery-script SCRIPT ...)"
)


class State:
    """State that every rank holds in memory and that `run_fn` keeps consistent across ranks.

    Subclasses say how to `save` (to host memory), `restore` (the last save) and `sync`
    (broadcast from rank 0). `bcast_object(obj)` returns rank 0's `obj` on every rank;
    `get_rank()` is this process' rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []
        self._commits = 0  # commits made, counted from the job's start (elastic resumes it)

    def register_reset_callbacks(self, callbacks):
        """Adds functions (no arguments) to call after every reset, e.g. to rescale the
        learning rate to the new `hvd.size()`."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Called by `run_fn` after a reset: `reset()`, then the registered callbacks in order."""
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state in host memory (what a later `restore()` returns to), then checks
        for host updates. Saving copies every tracked value: commit every few batches rather
        than every batch when that copy is costly."""
        self.save()
        self._commits += 1
        if elastic_worker.active():
            elastic_worker.save(self, self._commits)
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when hosts were added or removed.

        Under an elastic launch rank 0 asks the driver and broadcasts its answer (one small
        collective). On a fixed world there are no host updates, so this does nothing."""
        if elastic_worker.active() and elastic_worker.hosts_updated():
            raise HostsUpdatedInterrupt(False)

    def save(self):
        """Copies the tracked values to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Returns the tracked values to the last `save()`, undoing later changes."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank's tracked values rank 0's."""
        raise NotImplementedError()

    def reset(self):
        """Rebuilds what depends on the world after a reset, before the next sync."""

    def _snapshot(self):
        """The last save as a picklable value (what an elastic relaunch resumes from)."""
        raise NotImplementedError()

    def _load_snapshot(self, snapshot):
        """Makes `snapshot` (from `_snapshot()`, maybe another process's) the last save."""
        raise NotImplementedError()


class ObjectState(State):
    """State of plain Python values, given as keyword arguments and exposed as attributes
    (`ObjectState(bcast, rank, epoch=0).epoch`). They must be picklable (sync broadcasts
    them as one object)."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _snapshot(self):
        return dict(self._saved_state)

    def _load_snapshot(self, snapshot):
        self._saved_state = dict(snapshot)

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def _gist(error):
    """The lines of an error that say what failed (a TF error wraps Horovod's in its own)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if "horovod" in line.lower() or "rank" in line.lower()]
    return " / ".join(telling or lines[:1])[:600]


def _reform_in_process(state, reset, why):
    """This process joins the next generation (elastic_worker.reform), takes the newest commit
    (its own from memory, or a peer's), then resets. Returns whether to skip the sync: every
    rank holds the resumed commit (else none had one, and rank 0's state is synced)."""
    elastic_worker.reform(why)
    resumed = elastic_worker.resume(state, in_memory=True)
    if resumed is not None:
        state._commits = resumed
    reset()
    state.on_reset()
    return resumed is not None


def run_fn(func, reset, translate_error=None):
    """Wraps `func(state, *args, **kwargs)` in the elastic loop: sync the state, call func;
    on a HostsUpdatedInterrupt, `reset()`, `state.on_reset()` and call again (syncing first
    unless the interrupt says `skip_sync`). On a HorovodInternalError, restore the last commit
    and re-raise (fixed world; see the module docstring). Under an elastic launch both end the
    process for the driver to relaunch, and a relaunched generation resumes from the newest
    commit and runs the reset callbacks (the world's size has changed) before calling func;
    over TCP (horovodrun --gloo) the process re-forms in place instead and does the same.
    `translate_error(e)` may turn a framework's exception into a HorovodInternalError (or
    return None to leave it alone)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        elastic = elastic_worker.active()
        skip_sync = False
        if elastic and elastic_worker.generation() > 0:
            resumed = elastic_worker.resume(state)
            if resumed is not None:
                state._commits = resumed
                state.on_reset()
                skip_sync = True
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                if elastic:  # the commit before it is on disk: the next generation resumes it
                    why = f"hosts changed at commit {state._commits}"
                    if elastic_worker.in_process():
                        skip_sync = _reform_in_process(state, reset, why)
                        continue
                    elastic_worker.exit_for_relaunch(f"{why}; the new generation resumes from it")
                skip_sync = getattr(e, "skip_sync", False)
            except Exception as e:
                internal = e if isinstance(e, HorovodInternalError) else None
                if internal is None and translate_error is not None:
                    internal = translate_error(e)
                if internal is None:
                    raise
                if elastic:
                    why = (
                        f"a collective failed ({_gist(internal)}); rolling "
                        f"back to commit {state._commits}: " + elastic_worker.progress_lost(state)
                    )
                    if elastic_worker.in_process():
                        state.restore()
                        skip_sync = _reform_in_process(state, reset, why)
                        continue
                    elastic_worker.exit_for_relaunch(why)
                state.restore()
                raise HorovodInternalError(FIXED_WORLD_FAILURE.format(error=internal)) from e
            reset()
            state.on_reset()

    return wrapper
