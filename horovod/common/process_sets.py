"""Process sets (upstream's `hvd.ProcessSet`): ops among a subset of the ranks.

    evens = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[evens])            # or, after init: evens = hvd.add_process_set([0, 2])
    if evens.included():
        hvd.allreduce(x, process_set=evens)   # negotiated and run by ranks 0 and 2 only

Every process set has its own negotiation, response cache, fusion and communicator in the
engine (csrc/engine/process_sets.h), so ops of different sets never fuse together and run
concurrently. Adding and removing a set is collective: every rank makes the same calls in the same
order (HOROVOD_DYNAMIC_PROCESS_SETS is accepted but not needed). As upstream, a broadcast's
root_rank is a global rank (hvd.rank()), which must be in the set; `process_set.rank()` is the
rank within the set (the order of allgather's blocks).
"""

import importlib
import operator

import numpy as np

from horovod.common.exceptions import NOT_INITIALIZED, HorovodInternalError

# The engine's bindings, imported when first used (horovod.common.basics imports this module,
# so this one reads the engine directly instead of through basics).


def _lib():
    return importlib.import_module("horovod._core")


def _initialized():
    try:
        return _lib().is_initialized()
    except ImportError:
        return False


def _topology(key):
    if not _initialized():
        raise ValueError(NOT_INITIALIZED)
    return _lib().topology()[key]


def _integer_ranks(given):
    """Sorted Python ints of `given` (NumPy integers too: `ProcessSet(np.arange(2))`); a
    ValueError naming what is not an integer rank."""
    ranks = []
    for r in np.asarray(given).ravel().tolist() if isinstance(given, np.ndarray) else given:
        try:
            if isinstance(r, (bool, np.bool_)):
                raise TypeError
            ranks.append(operator.index(r))
        except TypeError:
            raise ValueError(
                "ProcessSet takes integer ranks or an mpi4py communicator; "
                f"{r!r} ({type(r).__name__}) in {given!r} is not an integer"
            ) from None
    return sorted(ranks)


class ProcessSet:
    """A set of ranks that run collectives together. Build it from global ranks (or an mpi4py
    communicator, at init only), then pass it to hvd.init(process_sets=[...]) or
    hvd.add_process_set(); `process_set_id` is set once it exists in the engine."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        if isinstance(ranks_or_comm, (list, tuple, range, set, frozenset, np.ndarray)):
            self.ranks = _integer_ranks(ranks_or_comm)
            return
        try:
            from mpi4py import MPI  # noqa: PLC0415  (only for communicator-built sets)
        except ImportError:
            MPI = None
        if MPI is None or not isinstance(ranks_or_comm, MPI.Comm):
            raise ValueError(
                "ProcessSet takes a list of integer ranks or an mpi4py communicator, got "
                f"{type(ranks_or_comm).__name__}"
            )
        self.mpi_comm = ranks_or_comm

    def _invalidate(self):
        self.process_set_id = None

    def _entry(self):
        """(ranks, this rank's rank in the set or -1) from the engine, or None."""
        if self.process_set_id is None or not _initialized():
            return None
        return _lib().process_sets().get(self.process_set_id)

    def size(self):
        """The number of ranks in the set, or None if it does not exist (yet, or any more)."""
        entry = self._entry()
        return None if entry is None else len(entry[0])

    def rank(self):
        """This process's rank within the set (None if the set does not exist). Raises
        ValueError on a rank outside the set."""
        entry = self._entry()
        if entry is None:
            return None
        if entry[1] < 0:
            raise ValueError(
                f"rank {_topology('rank')} is not in process set {self.process_set_id} "
                f"(ranks {entry[0]}): it has no rank there"
            )
        return entry[1]

    def included(self):
        """Whether this process is in the set (None if its ranks are not known yet)."""
        if self.ranks is None:
            return None
        return _topology("rank") in self.ranks

    def __str__(self):
        return (
            f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, "
            f"mpi_comm={self.mpi_comm})"
        )

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
_by_id = {0: global_process_set}  # id -> ProcessSet, of the sets added on this rank


def process_set_id(process_set):
    """The engine's id of `process_set` (None: the global set), for the frontends' ops."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError(
            f"process_set must be a hvd.ProcessSet (or None), got {type(process_set).__name__}"
        )
    pid = process_set.process_set_id
    if pid is None:
        raise ValueError(
            f"{process_set} does not exist in the engine: pass it to hvd.init(process_sets=[...]) "
            "or hvd.add_process_set() first (or it was removed)"
        )
    known = _by_id.get(pid)
    if known is not process_set and (known is None or known.ranks != process_set.ranks):
        # An id set by hand (upstream's "you should not do this"): refused here, before an op
        # would run on another set's ranks or wait for a set that is not there.
        what = (
            f"there is no process set with id {pid!r} (never added, or removed)"
            if known is None
            else f"process set id {pid} is ranks {known.ranks}"
        )
        raise ValueError(
            f"{process_set}: {what}; process_set_id was set by hand? Use the ProcessSet that "
            "hvd.add_process_set() or hvd.init() returned"
        )
    return pid


def set_size(process_set):
    """The number of ranks of `process_set` (None: every rank)."""
    return rank_and_size(process_set_id(process_set))[1]


def rank_and_size(pid):
    """(this rank's rank in the set of id `pid`, or -1 outside it; the set's size)."""
    if pid == 0:
        return _topology("rank"), _topology("size")
    entry = _lib().process_sets().get(pid)
    if entry is None:
        raise ValueError(f"there is no process set with id {pid} (never added, or removed)")
    return entry[1], len(entry[0])


def add_process_set(process_set):
    """Adds a process set after init and returns it (a ProcessSet, or a list of ranks).
    Collective: every rank calls it, in the same order, with the same ranks. A set with the
    same ranks as an existing one is a ValueError, as upstream."""
    if not _initialized():
        raise ValueError(NOT_INITIALIZED)
    invalid, by_comm = "", False
    if not isinstance(process_set, ProcessSet):
        try:
            process_set = ProcessSet(process_set)
        except ValueError as e:  # negotiated below, so that every rank fails, not this one only
            invalid, process_set = str(e), None
    elif process_set.ranks is None:
        by_comm = True
        invalid = (
            "adding a process set built from an MPI communicator after init is not supported "
            "(as upstream): build it from a list of ranks, or pass it to hvd.init(process_sets=...)"
        )
    ranks = [] if invalid else list(process_set.ranks)
    # The engine checks the range (AddProcessSet); a rank past int64 cannot reach it through the
    # binding, so that one is worded here as the engine words it.
    huge = [r for r in ranks if not -(2**63) <= r < 2**63]
    if huge:
        invalid, ranks = f"process set rank {huge[0]} is outside [0, {_topology('size')})", []
    try:
        pid = _lib().add_process_set(ranks, invalid)
    except ValueError:
        if by_comm:  # upstream's error type, once every rank has failed
            raise NotImplementedError(invalid) from None
        raise
    process_set.process_set_id = pid
    _by_id[pid] = process_set
    return process_set


def reset():
    """A new world (hvd.init after a re-form): the last world's sets are gone from the engine,
    so their ProcessSet objects no longer name one (their ops say so)."""
    for pid, ps in list(_by_id.items()):
        if pid != 0:
            ps._invalidate()
    _by_id.clear()
    _by_id[0] = global_process_set


def by_id(pid):
    """The ProcessSet the engine knows as `pid` (ops compiled by torch.compile carry the id)."""
    try:
        return _by_id[pid]
    except KeyError:
        raise ValueError(f"there is no process set with id {pid} (removed?)") from None


def remove_process_set(process_set):
    """Removes a process set; collective, like add_process_set. Returns False for the global
    set or a set that does not exist; True once removed (its pending ops fail)."""
    pid = process_set.process_set_id
    if pid is None or pid == 0:
        return False
    if not _initialized():
        raise ValueError(NOT_INITIALIZED)
    try:
        _lib().remove_process_set(pid)
    except ValueError as e:
        if "there is no process set" not in str(e):
            raise
        return False
    finally:
        _by_id.pop(pid, None)
        process_set._invalidate()
    return True


def _ranks_of_comms(sets, world):
    """Global ranks of sets built from mpi4py communicators, learned before the engine starts
    (so mpi4py may still use `world`): each member translates its communicator's ranks, and
    an allgather over `world` tells the ranks outside it."""
    from mpi4py import MPI  # noqa: PLC0415

    mine = []
    for ps in sets:
        comm = ps.mpi_comm
        if comm == MPI.COMM_NULL:
            mine.append(None)
            continue
        ranks = MPI.Group.Translate_ranks(
            comm.Get_group(), list(range(comm.Get_size())), world.Get_group()
        )
        mine.append(sorted(ranks))
    every = world.allgather(mine)
    for i, ps in enumerate(sets):
        known = [r[i] for r in every if r[i] is not None]
        if not known:
            raise ValueError(f"process_sets entry {ps}: no rank is in its communicator")
        ps.ranks = known[0]


def init_process_sets(process_sets, world_comm):
    """hvd.init's part: the sets given to init (a list of ProcessSet, or "dynamic")."""
    if process_sets is None or (isinstance(process_sets, str) and process_sets == "dynamic"):
        sets = []
    else:
        sets = list(process_sets)
    if any(not isinstance(ps, ProcessSet) for ps in sets):
        raise ValueError('init(process_sets=...) takes a list of hvd.ProcessSet, or "dynamic"')
    by_comm = [ps for ps in sets if ps.ranks is None]
    if by_comm:
        from mpi4py import MPI  # noqa: PLC0415

        _ranks_of_comms(by_comm, world_comm if world_comm is not None else MPI.COMM_WORLD)
    return sets


def describe_initial_sets(sets):
    """This rank's init(process_sets=...) list as the engine's Init compares it across ranks
    (a mismatch fails init on every rank, naming each side's lists)."""
    return repr([list(ps.ranks) for ps in sets])


def add_initial_sets(sets):
    """After the engine started (its Init found the same list on every rank): adds each set,
    in order, on every rank."""
    global_process_set.ranks = list(range(_topology("size")))
    for i, ps in enumerate(sets):
        try:
            add_process_set(ps)
        except (ValueError, HorovodInternalError) as e:  # the same type, saying where
            raise type(e)(f"init(process_sets=...): entry {i} ({ps}): {e}") from None
