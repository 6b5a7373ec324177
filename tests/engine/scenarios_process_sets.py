"""Process sets (issue 21): ops among a subset of ranks, each set negotiated, cached, fused and
run on its own communicator (test_process_sets.py). Every rank computes the references itself.
"""

import numpy as np

import horovod.numpy as hvd
from tests.support.reference import DTYPES, check, make, ops, reference
from tests.support.scenario import expect_error

OPS = ops(hvd)


def _sets():
    """The even ranks and the odd ranks: disjoint sets that run at the same time."""
    n = hvd.size()
    return list(range(0, n, 2)), list(range(1, n, 2))


def _collectives_in(ps, tag):
    """Every collective in `ps`, against references over its ranks only."""
    ranks, me = ps.ranks, hvd.rank()
    k = ps.rank()
    assert ranks[k] == me and ps.size() == len(ranks) and ps.included()
    for dt in DTYPES:
        for op in ("sum", "average", "min", "max"):
            got = hvd.allreduce(
                make(me, (7, 3), dt, op), op=OPS[op], name=f"{tag}/ar", process_set=ps
            )
            want = reference([make(q, (7, 3), dt, op) for q in ranks], op, dt)
            check(got, want, dt, f"{tag} allreduce {op} {dt} in {ranks}")
    outs = hvd.grouped_allreduce(
        [np.full(3, float(me)), np.full(1000, 1.0, np.float32)],
        op=hvd.Sum,
        name=f"{tag}/grp",
        process_set=ps,
    )
    assert (outs[0] == sum(ranks)).all() and (outs[1] == len(ranks)).all(), outs
    # allgather: first dimensions differ per rank; blocks come in the set's rank order
    got = hvd.allgather(np.full((me + 1, 2), me, np.int32), name=f"{tag}/ag", process_set=ps)
    want = np.concatenate([np.full((q + 1, 2), q, np.int32) for q in ranks])
    assert np.array_equal(got, want), (got, want)
    # broadcast: the root is a global rank, as upstream
    root = ranks[-1]
    got = hvd.broadcast(np.full(4, float(me)), root_rank=root, name=f"{tag}/bc", process_set=ps)
    assert (got == root).all(), got
    # alltoall: rank q sends j+1 rows to the set's j-th rank
    m = len(ranks)
    send = np.concatenate([np.full((j + 1, 2), 10 * me + j) for j in range(m)])
    got, splits = hvd.alltoall(
        send, splits=[j + 1 for j in range(m)], name=f"{tag}/a2a", process_set=ps
    )
    assert list(splits) == [k + 1] * m, splits
    want = np.concatenate([np.full((k + 1, 2), 10 * q + k) for q in ranks])
    assert np.array_equal(got, want), (got, want)
    even = hvd.alltoall(np.arange(2 * m), name=f"{tag}/a2a_even", process_set=ps)[0]
    assert list(even) == [2 * k, 2 * k + 1] * m, even
    # reducescatter: this rank's block of rows of the sum
    x = np.arange(2 * m * 3, dtype=np.float64).reshape(2 * m, 3) + me
    got = hvd.reducescatter(x, op=hvd.Sum, name=f"{tag}/rs", process_set=ps)
    full = sum(np.arange(2 * m * 3, dtype=np.float64).reshape(2 * m, 3) + q for q in ranks)
    assert np.array_equal(got, full[2 * k : 2 * k + 2]), got


def sc_ps_collectives():
    """Both sets at once (dynamic add, every rank): every collective in each rank's set, the
    same tensor names in both sets at the same time (each set negotiates its own), then the
    global set still works, and a rank outside a set is refused with a named error."""
    evens_ranks, odds_ranks = _sets()
    evens = hvd.add_process_set(evens_ranks)
    odds = hvd.add_process_set(odds_ranks)
    assert evens.process_set_id != odds.process_set_id != 0
    mine, other = (evens, odds) if hvd.rank() % 2 == 0 else (odds, evens)
    for _ in range(2):  # the second time through the response cache
        _collectives_in(mine, "ps")
    assert not other.included()
    expect_error(
        lambda: hvd.allreduce(np.ones(2), name="ps/outside", process_set=other),
        ValueError,
        f"rank {hvd.rank()} is not in process set {other.process_set_id}",
        str(other.ranks),
    )
    expect_error(lambda: other.rank(), ValueError, "not in process set")
    got = hvd.allreduce(np.ones(3), op=hvd.Sum, name="ps/global")
    assert (got == hvd.size()).all(), got
    # unnamed ops are counted per set: after unnamed ops in a set, the global set's unnamed
    # names still agree on every rank (a global counter would differ between the sets' members)
    for _ in range(mine.process_set_id):  # the sets run different numbers of them
        hvd.allreduce(np.ones(1), process_set=mine)
    got = hvd.allreduce(np.ones(2), op=hvd.Sum)
    assert (got == hvd.size()).all(), got
    assert hvd.remove_process_set(evens) and hvd.remove_process_set(odds)


def sc_ps_init():
    """hvd.init(process_sets=[...]) with a set of ranks and one built from an mpi4py
    communicator; join within a set; remove, then an op on the removed set fails."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    n, me = world.Get_size(), world.Get_rank()
    by_ranks = hvd.ProcessSet(list(range(n - 1)) or [0])
    comm = world.Split(0 if me >= 1 else MPI.UNDEFINED, me)
    by_comm = hvd.ProcessSet(comm)
    hvd.init(process_sets=[by_ranks, by_comm])
    assert by_ranks.process_set_id is not None and by_comm.process_set_id is not None
    assert by_comm.ranks == list(range(1, n)), by_comm.ranks
    for ps in (by_ranks, by_comm):
        if ps.included():
            got = hvd.allreduce(np.full(2, me + 1.0), op=hvd.Sum, name="pi/ar", process_set=ps)
            assert (got == sum(q + 1.0 for q in ps.ranks)).all(), got
            # the set's last rank has more data: the others join early
            steps = 1 + ps.rank()
            for _ in range(steps):
                hvd.allreduce(np.ones(2), name="pi/join", process_set=ps)
            assert hvd.join(process_set=ps) == ps.ranks[-1]
    pid = by_ranks.process_set_id
    assert hvd.remove_process_set(by_ranks)
    assert not hvd.remove_process_set(by_ranks)  # already removed: False, as upstream
    assert by_ranks.process_set_id is None
    if me in range(n - 1):
        stale = hvd.ProcessSet(by_ranks.ranks)
        stale.process_set_id = pid
        expect_error(
            lambda: hvd.allreduce(np.ones(1), name="pi/gone", process_set=stale),
            ValueError,
            f"no process set with id {pid}",
        )
    hvd.shutdown()


sc_ps_init.manages_init = True


def sc_ps_errors():
    """Mistakes fail on every rank with the ranks named as hvd.rank() numbers them: ranks that
    add different sets, a duplicate set, a broadcast root outside the set, shapes that differ
    within a set (3+ ranks), and an op still pending when its set is removed."""
    me, n = hvd.rank(), hvd.size()
    expect_error(
        lambda: hvd.add_process_set([0] if me == 0 else [0, 1]),
        hvd.HorovodMismatchError,
        "Mismatched process set ranks",
        "rank [0] has ranks [0]",
    )
    a = hvd.add_process_set(list(range(1, n)))
    expect_error(lambda: hvd.add_process_set(list(range(1, n))), ValueError, "already exists")
    expect_error(lambda: hvd.add_process_set([0, n]), ValueError, f"rank {n} is outside")
    if a.included():
        expect_error(
            lambda: hvd.broadcast(np.ones(2), root_rank=0, name="pe/bc", process_set=a),
            ValueError,
            "root rank 0 is not in process set",
        )
        if n >= 3:
            expect_error(
                lambda: hvd.allreduce(np.ones(me), name="pe/shape", process_set=a),
                hvd.HorovodMismatchError,
                "rank [1] has shape [1]",
                "rank [2] has shape [2]",
            )
    # pending on the set's first rank only (a set of 2+ ranks); the removal fails it
    pending = n >= 3 and me == 1
    if pending:
        handle = hvd.allreduce_async(np.ones(2), name="pe/pending", process_set=a)
    hvd.remove_process_set(a)
    if pending:
        expect_error(lambda: hvd.synchronize(handle), ValueError, "was removed")


def sc_ps_init_mismatch():
    """hvd.init(process_sets=...) with a different list on rank 0: init fails on every rank
    naming each side's lists; Horovod did not start, and a second init says why."""
    from mpi4py import MPI

    me, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    sets = [hvd.ProcessSet([0])] if me == 0 else [hvd.ProcessSet([0, 1])]
    expect_error(
        lambda: hvd.init(process_sets=sets),
        hvd.HorovodMismatchError,
        "Mismatched init(process_sets=...)",
        "rank [0] passed sets of ranks [[0]]",
        f"{list(range(1, n))} passed sets of ranks [[0, 1]]",
        "Horovod did not start",
    )
    assert not hvd.is_initialized() and sets[0].process_set_id is None
    expect_error(hvd.init, ValueError, "Mismatched init(process_sets=...)")


def sc_ps_init_fewer():
    """The last rank passes one set fewer: every rank fails init, naming it."""
    from mpi4py import MPI

    me, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    sets = [hvd.ProcessSet([0]), hvd.ProcessSet([1])][: 1 if me == n - 1 else 2]
    expect_error(
        lambda: hvd.init(process_sets=sets),
        hvd.HorovodMismatchError,
        f"rank [{n - 1}] passed sets of ranks [[0]]",
        "passed sets of ranks [[0], [1]]",
    )


sc_ps_init_mismatch.manages_init = True
sc_ps_init_fewer.manages_init = True


def sc_ps_bad_ranks():
    """add_process_set with ranks one rank cannot use fails on every rank naming it (the
    others waited forever); NumPy integers are integers; a set id set by hand is refused before
    the op, as upstream."""
    me, n = hvd.rank(), hvd.size()
    assert hvd.ProcessSet(np.arange(2)).ranks == [0, 1]
    ps = hvd.add_process_set([np.int64(0)] if me == 0 else [0])  # the same set on every rank
    assert ps.ranks == [0] and type(ps.ranks[0]) is int
    assert hvd.remove_process_set(ps)
    for bad, needle in (
        ([2**40], f"process set rank {2**40} is outside [0, {n})"),  # the engine's check
        ([2**70], f"process set rank {2**70} is outside [0, {n})"),  # past the binding's int64
        ([0, "1"], "'1' (str)"),
        ([np.float64(0)], "is not an integer"),
        ([True], "is not an integer"),
    ):
        mine = bad if me == 0 else [0]
        expect_error(lambda mine=mine: hvd.add_process_set(mine), ValueError, "on rank 0", needle)
    evens = hvd.add_process_set(np.arange(0, n, 2))
    got = hvd.allreduce(np.ones(2), op=hvd.Sum, name="pbr/after")
    assert (got == n).all(), got
    fake = hvd.ProcessSet([0])
    fake.process_set_id = 10  # upstream's test: "you should not do this"
    expect_error(
        lambda: hvd.allreduce(np.ones(2), name="pbr/fake", process_set=fake),
        ValueError,
        "no process set with id 10",
        "set by hand",
    )
    borrowed = hvd.ProcessSet([0, 1])
    borrowed.process_set_id = evens.process_set_id
    if n >= 3:  # evens is [0, 2]: another set's id
        expect_error(
            lambda: hvd.allreduce(np.ones(2), name="pbr/borrowed", process_set=borrowed),
            ValueError,
            f"process set id {evens.process_set_id} is ranks [0, 2]",
        )
    assert hvd.remove_process_set(evens)
