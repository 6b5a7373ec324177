"""The shared submission layer through its smallest frontend (array_frontend.py: array.array in
and out): every collective, blocking and async, named and unnamed, in a process set, the object
collectives, and one rank's bad argument failing every rank with the tensor named."""

import array

import horovod.common.handles as handles
from tests.engine import array_frontend as hvd
from tests.support.scenario import expect_error


def _is(got, typecode, values):
    assert isinstance(got, array.array) and got.typecode == typecode, got
    assert list(got) == list(values), (got, values)


def sc_layer_collectives():
    r, n = hvd.rank(), hvd.size()
    total = n * (n - 1) / 2
    _is(hvd.allreduce(array.array("d", [r, 1.0]), op=hvd.Sum, name="ly/ar"), "d", [total, n])
    _is(hvd.allreduce(array.array("d", [r, 1.0])), "d", [total / n, 1.0])  # unnamed, Average
    x = array.array("i", [r, 2])
    h = hvd.allreduce_async(x, op=hvd.Max, name="ly/inplace", out=x)
    assert isinstance(h, handles.Handle)
    while not hvd.poll(h):
        pass
    _is(hvd.synchronize(h), "i", [n - 1, 2])
    _is(x, "i", [n - 1, 2])  # out= is the input's own buffer: reduced in place
    outs = hvd.grouped_allreduce(
        [array.array("f", [1.0] * (k + 1)) for k in range(3)], op=hvd.Sum, name="ly/group"
    )
    for k, got in enumerate(outs):
        _is(got, "f", [float(n)] * (k + 1))
    _is(
        hvd.allgather(array.array("q", [r] * (r + 1)), name="ly/ag"),
        "q",
        [q for q in range(n) for _ in range(q + 1)],
    )
    _is(
        hvd.broadcast(array.array("h", [r, -r]), root_rank=n - 1, name="ly/bc"), "h", [n - 1, 1 - n]
    )
    got, splits = hvd.alltoall(array.array("B", [r] * n), name="ly/a2a")
    _is(got, "B", list(range(n)))
    _is(splits, "l", [1] * n)
    got, splits = hvd.alltoall(
        array.array("d", [r] * n), splits=[n] + [0] * (n - 1), name="ly/a2a-splits"
    )  # every rank's rows to rank 0
    _is(got, "d", [q for q in range(n) for _ in range(n)] if r == 0 else [])
    _is(splits, "l", [n if r == 0 else 0] * n)
    _is(hvd.reducescatter(array.array("d", [1.0] * n), op=hvd.Sum, name="ly/rs"), "d", [n])
    assert hvd.broadcast_object({"r": r} if r == 0 else None, 0, name="ly/obj") == {"r": 0}
    assert hvd.allgather_object((r, "x" * r)) == [(q, "x" * q) for q in range(n)]


def sc_layer_process_set():
    r, n = hvd.rank(), hvd.size()
    firsts = hvd.add_process_set(list(range(n - 1)))  # every rank but the last
    try:
        if firsts.included():
            got = hvd.allreduce(array.array("d", [1.0]), op=hvd.Sum, process_set=firsts)
            _is(got, "d", [n - 1.0])
            got = hvd.allgather(array.array("i", [r]), name="ly/ps-ag", process_set=firsts)
            _is(got, "i", list(range(n - 1)))
        hvd.allreduce(array.array("d", [0.0]), name="ly/ps-after")  # every rank, after
    finally:
        hvd.remove_process_set(firsts)


def sc_layer_bad_arguments():
    # One rank's mistake fails the op on every rank, each naming the tensor: no rank waits.
    r, n = hvd.rank(), hvd.size()
    bad = [1.0, 2.0] if r == n - 1 else array.array("d", [1.0, 2.0])  # a list is not taken
    msg = expect_error(
        lambda: hvd.allreduce(bad, name="ly/bad-input"), (TypeError, ValueError), "ly/bad-input"
    )
    if r == n - 1:
        assert "expected an array.array, got list" in msg, msg
    root = n + 5 if r == 0 else 0
    expect_error(
        lambda: hvd.broadcast(array.array("d", [1.0]), root_rank=root, name="ly/bad-root"),
        ValueError,
        "ly/bad-root",
    )
    expect_error(
        lambda: hvd.grouped_allreduce(
            [array.array("d", [1.0]), array.array("d", [1.0])],
            name="ly/bad-group",
            prescale_factor="2" if r == 0 else 1.0,
        ),
        (TypeError, ValueError),
        "ly/bad-group.0",
    )
    _is(hvd.allreduce(array.array("d", [1.0]), op=hvd.Sum, name="ly/after"), "d", [float(n)])
