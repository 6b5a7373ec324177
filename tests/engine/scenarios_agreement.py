"""What ranks must agree on beyond one tensor (test_agreement.py): a group's size, and every
argument check a frontend makes, which must fail every rank, not only the rank that made it."""

import numpy as np

import horovod.numpy as hvd
from horovod.common.exceptions import HorovodMismatchError
from tests.support.scenario import expect_error


def _works(tag):
    n = hvd.size()
    assert (hvd.allreduce(np.ones(3), op=hvd.Sum, name=f"{tag}/after") == n).all()


def sc_group_sizes():
    """Grouped ops whose ranks pass different numbers of tensors fail on every rank, naming
    the group and each rank's count. Before: rank 0's extra member waited for ever while the
    other ranks returned results. Cached (a group seen before) and new groups; a rank with the
    smaller group; then the same group agreeing again works."""
    r, n = hvd.rank(), hvd.size()
    others = str(list(range(1, n)))

    def group(name, count):
        return hvd.grouped_allreduce(
            [np.full(3, i + 1.0) for i in range(count)], op=hvd.Sum, name=name
        )

    for _ in range(2):  # cached from here on, with 3 members on every rank
        assert [o.tolist() for o in group("gs/warm", 3)] == [[n * (i + 1.0)] * 3 for i in range(3)]
    for tag, count in (
        ("gs/warm", 2 + (r == 0)),
        ("gs/cold", 2 + (r == 0)),
        ("gs/less", 2 - (r == 0)),
    ):
        big, small = (3, 2) if tag != "gs/less" else (1, 2)
        msg = expect_error(
            lambda: group(tag, count),
            HorovodMismatchError,
            "group sizes",
            f"group '{tag}'",
            f"rank [0] has {big} tensor",
            f"{others} ha",
            f"{small} tensors",
        )
        assert "data types" not in msg, msg
        _works(tag)
    # The group is usable again once the ranks agree.
    assert [o.tolist() for o in group("gs/warm", 3)] == [[n * (i + 1.0)] * 3 for i in range(3)]
    # One member disagreeing (a shape) fails the group on every rank; the others still agree.
    expect_error(
        lambda: hvd.grouped_allreduce(
            [np.ones(2), np.ones(3 + (r == 0)), np.ones(4)], name="gs/member"
        ),
        HorovodMismatchError,
        "gs/member.1",
        "shapes",
    )
    _works("gs/member")


def sc_one_rank_args():
    """An argument only rank 1 gets wrong fails the op on every rank: rank 1 raises its own
    error (TypeError or ValueError), the others a ValueError naming rank 1 and the reason.
    Before: rank 1 raised at once and the others waited for it (for ever by default)."""
    r = hvd.rank()
    x = np.ones(4)
    bad = r == 1
    cases = {
        "or/root-float": (
            lambda nm: hvd.broadcast(x, root_rank=0.0 if bad else 0, name=nm),
            TypeError,
            "root_rank must be an integer",
        ),
        "or/root-huge": (
            lambda nm: hvd.broadcast(x, root_rank=2**40 if bad else 0, name=nm),
            ValueError,
            "outside",
        ),
        "or/prescale": (
            lambda nm: hvd.allreduce(x, name=nm, prescale_factor="x" if bad else 1.0),
            TypeError,
            "prescale_factor must be a real number",
        ),
        "or/op": (
            lambda nm: hvd.allreduce(x, name=nm, op=12345 if bad else hvd.Sum),
            ValueError,
            "unknown reduce op",
        ),
        "or/ragged": (
            lambda nm: hvd.allgather([[1.0], [1.0, 2.0]] if bad else x, name=nm),
            TypeError,
            "not array-like",
        ),
        "or/out-list": (
            lambda nm: hvd.allreduce(x, name=nm, out=[0.0] * 4 if bad else None),
            TypeError,
            "out must be a NumPy array",
        ),
        "or/out-size": (
            lambda nm: hvd.allreduce(x, name=nm, out=np.zeros(3) if bad else None),
            ValueError,
            "out must be a writable C-contiguous",
        ),
        "or/group": (
            lambda nm: hvd.grouped_allreduce([x, x], name=nm, postscale_factor=None if bad else 1),
            TypeError,
            "postscale_factor must be a real number",
        ),
    }
    for nm, (fn, exc, reason) in cases.items():
        if bad:
            expect_error(lambda: fn(nm), exc, f"'{nm}", reason)
        else:
            expect_error(lambda: fn(nm), ValueError, f"'{nm}", "on rank 1", reason)
        _works(nm)
