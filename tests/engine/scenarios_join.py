"""hvd.join(): ranks with less data join, the others' allreduces go on (test_join.py)."""

import os

import numpy as np

import horovod.numpy as hvd
from tests.support.scenario import expect_error


def check_last_joined(last):
    """After ranks 1.. joined at about the same time (rank 0 first): which of them join()
    names as the last depends on the rounds their joins reached rank 0 in. It must be one of
    them, and the same on every rank."""
    n = hvd.size()
    assert 1 <= last < n, f"join() returned {last}"
    everyone = hvd.allgather(np.array([last], np.int32), name="join/last")
    assert (everyone == last).all(), f"join() returned {everyone.tolist()} on ranks 0..{n - 1}"


def _steps(q):
    return 3 + 2 * q  # rank q runs this many steps: uneven data


def sc_join_uneven():
    """Rank q runs 3 + 2q steps of named and unnamed allreduces (Sum, Average of floats and
    int32, a fused group), then joins. A step's result is over the ranks still running it,
    the joined ones' zeros included: Average divides by the job's size (upstream's), or by the
    ranks still running under HOROVOD_JOIN_AVERAGE=contributors. join() returns the last rank
    to join on every rank, and the engine is usable afterwards with every rank. Twice: the
    cache is warm the second time, and joined ranks then take part through the cached fast
    path."""
    r, n = hvd.rank(), hvd.size()
    by_contributors = os.environ.get("HOROVOD_JOIN_AVERAGE") == "contributors"
    for rnd in range(2):
        for k in range(_steps(r)):
            live = [q for q in range(n) if k < _steps(q)]
            got = hvd.allreduce(np.full(5, 1.0 + r), op=hvd.Sum, name=f"j/sum/{k % 3}")
            assert (got == sum(1.0 + q for q in live)).all(), (rnd, k, got)
            got = hvd.allreduce(np.full(3, 2.0 * (r + 1)), op=hvd.Average, name="j/avg")
            divisor = len(live) if by_contributors else n
            want = sum(2.0 * (q + 1) for q in live) / divisor
            assert np.allclose(got, want), (rnd, k, got, want)
            got = hvd.allreduce(np.full(4, 10 * (r + 1), np.int32), op=hvd.Average, name="j/iavg")
            assert (got == sum(10 * (q + 1) for q in live) // divisor).all(), (k, got)
            outs = hvd.grouped_allreduce(
                [np.full(2, float(r)), np.full(300, 1.0)], op=hvd.Sum, name="j/grp"
            )
            assert (outs[0] == sum(live)).all() and (outs[1] == len(live)).all(), (k, outs)
        last = hvd.join()
        assert last == n - 1, f"join() returned {last}, expected {n - 1}"
        assert (hvd.allreduce(np.ones(2), op=hvd.Sum, name="j/after") == n).all()


def sc_join_other_ops():
    """While rank 0 has joined, an allgather or broadcast of the others fails on each of them
    naming the joined rank; their allreduces still work; then they join too."""
    r, n = hvd.rank(), hvd.size()
    if r == 0:
        check_last_joined(hvd.join())
        return
    expect_error(
        lambda: hvd.allgather(np.ones((2, 2)), name="jo/ag"), ValueError, "jo/ag", "[0]", "joined"
    )
    expect_error(lambda: hvd.broadcast(np.ones(2), root_rank=1, name="jo/bc"), ValueError, "joined")
    got = hvd.allreduce(np.full(2, float(r)), op=hvd.Average, name="jo/ar")
    assert np.allclose(got, sum(range(1, n)) / n), got  # rank 0's zeros counted, as upstream
    check_last_joined(hvd.join())


def sc_join_gpu_tensor():
    """While rank 0 has joined, an allreduce of a GPU tensor (host memory claimed as GPU memory
    through the engine's `device` argument: the refusal path needs no GPU) fails on every rank
    that submitted it, saying it is a GPU allreduce and naming the joined rank; host-memory
    allreduces then still work, and every rank joins."""
    from horovod import _core

    r, n = hvd.rank(), hvd.size()
    if r == 0:
        check_last_joined(hvd.join())
        return
    x = np.ones(4, np.float32)

    def submit():
        h = _core.enqueue(0, ["jg/gpu"], [x], None, int(hvd.Sum), 0, 1.0, 1.0, [], device=0)
        _core.wait(h, 60.0)

    expect_error(submit, ValueError, "jg/gpu", "GPU ALLREDUCE cannot run while rank [0] has joined")
    got = hvd.allreduce(np.full(2, float(r)), op=hvd.Sum, name="jg/host")
    assert (got == sum(range(1, n))).all(), got
    check_last_joined(hvd.join())
