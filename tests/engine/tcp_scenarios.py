"""The engine's scenario program for the TCP transport (test_tcp.py): every scenario of
scenarios.py, plus TCP versions of the few that take something from MPI that a TCP job lacks
(the transport's name, mpi4py for the rank before init or for a communicator). Same protocol
(tests/support/scenario.py); launched through tests/support/tcp.py, which has the verdict lines
name the rank from torchrun's RANK.

  python tests/support/tcp.py tests/engine/tcp_scenarios.py NAME[,NAME...] [ARGS...]

with torchrun's variables set (tests/support/tcp.launch_tcp sets them).
"""

import os
import sys

import numpy as np

import horovod.numpy as hvd
from horovod.common import basics
from tests.engine.scenarios import SCENARIOS
from tests.support import scenario
from tests.support.scenario import expect_error, manages_init


def _launcher_rank_size():
    """(rank, size) from torchrun's variables: what mpi4py's COMM_WORLD gave before init."""
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def sc_tcp_transport():
    """The job runs over TCP and says so: transport() (before and after init the same),
    Gloo's place taken, no MPI; one host, so local == global (scenarios_lifecycle's
    sc_topology, which asserts mpi_enabled(), is the MPI twin)."""
    r, n = hvd.rank(), hvd.size()
    assert (r, n) == _launcher_rank_size(), (r, n)
    assert basics.transport() == "tcp", basics.transport()
    if hasattr(hvd, "transport"):  # horovod.numpy's re-export, where the frontend has it
        assert hvd.transport() == "tcp", hvd.transport()
    assert hvd.gloo_built() and hvd.gloo_enabled() and not hvd.mpi_enabled()
    assert hvd.local_size() == n and hvd.local_rank() == r, "single host: local == global"
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    got = hvd.allreduce(np.array([r], np.int64), op=hvd.Sum, name="tcp/ranks")
    assert got[0] == n * (n - 1) // 2, got


@manages_init
def sc_ps_init_tcp():
    """scenarios_process_sets' sc_ps_init without mpi4py: init(process_sets=[...]) with the
    first n-1 ranks and the last n-1 ranks (there, a set from a communicator); join within a
    set; remove, then an op on the removed set fails."""
    me, n = _launcher_rank_size()
    head = hvd.ProcessSet(list(range(n - 1)) or [0])
    tail = hvd.ProcessSet(list(range(1, n)))
    hvd.init(process_sets=[head, tail])
    assert head.process_set_id is not None and tail.process_set_id is not None
    for ps in (head, tail):
        if ps.included():
            got = hvd.allreduce(np.full(2, me + 1.0), op=hvd.Sum, name="pi/ar", process_set=ps)
            assert (got == sum(q + 1.0 for q in ps.ranks)).all(), got
            for _ in range(1 + ps.rank()):  # the set's last rank has more data
                hvd.allreduce(np.ones(2), name="pi/join", process_set=ps)
            assert hvd.join(process_set=ps) == ps.ranks[-1]
    pid = head.process_set_id
    assert hvd.remove_process_set(head) and not hvd.remove_process_set(head)
    if me in range(n - 1):
        stale = hvd.ProcessSet(head.ranks)
        stale.process_set_id = pid
        expect_error(
            lambda: hvd.allreduce(np.ones(1), name="pi/gone", process_set=stale),
            ValueError,
            f"no process set with id {pid}",
        )
    hvd.shutdown()


@manages_init
def sc_ps_init_mismatch_tcp():
    """scenarios_process_sets' sc_ps_init_mismatch with the rank from the launcher: a
    different list on rank 0 fails init on every rank naming both; a second init says why."""
    me, n = _launcher_rank_size()
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


@manages_init
def sc_ps_init_fewer_tcp():
    """scenarios_process_sets' sc_ps_init_fewer with the rank from the launcher."""
    me, n = _launcher_rank_size()
    sets = [hvd.ProcessSet([0]), hvd.ProcessSet([1])][: 1 if me == n - 1 else 2]
    expect_error(
        lambda: hvd.init(process_sets=sets),
        hvd.HorovodMismatchError,
        f"rank [{n - 1}] passed sets of ranks [[0]]",
        "passed sets of ranks [[0], [1]]",
    )


OWN = scenario.collect(sys.modules[__name__])
assert not set(OWN) & set(SCENARIOS), set(OWN) & set(SCENARIOS)

if __name__ == "__main__":
    scenario.main(
        {**SCENARIOS, **OWN}, sys.argv[1].split(","), init=hvd.init, shutdown=hvd.shutdown
    )
