"""horovod.spark without a cluster: the placement of ranks on the tasks' hosts, the output relay
between tasks and driver, and the requests refused before Spark is asked anything (transport,
interfaces, no SparkContext)."""

import io
import socket
import time

import pytest

import horovod.spark
from horovod.spark import SparkSetupError, relay
from horovod.spark.task import assign_ranks


def test_ranks_are_grouped_by_host_with_local_and_cross_ranks():
    addresses = ["a:1", "b:1", "a:2", "c:1", "b:2", "a:3"]
    got = [tuple(s) for s in assign_ranks(addresses)]
    # (rank, host, local_rank, local_size, cross_rank, cross_size) per task, partition order.
    assert got == [
        (0, "a", 0, 3, 0, 3),
        (3, "b", 0, 2, 1, 3),
        (1, "a", 1, 3, 0, 2),
        (5, "c", 0, 1, 2, 3),
        (4, "b", 1, 2, 1, 2),
        (2, "a", 2, 3, 0, 1),
    ]
    one_host = [tuple(s) for s in assign_ranks(["h:5", "h:6"])]
    assert one_host == [(0, "h", 0, 2, 0, 1), (1, "h", 1, 2, 0, 1)]
    assert assign_ranks(["[::1]:7"])[0].host == "[::1]"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"use_mpi": True}, "use_mpi=True is not supported"),
        ({"use_mpi": True, "use_gloo": True}, "TCP transport"),
        ({"use_gloo": False}, "use_gloo=False leaves no transport"),
        ({"extra_mpi_args": "-x FOO"}, "extra_mpi_args is for mpirun"),
        ({"nics": {"eth0", "eth1"}}, "give one network interface"),
        ({"start_timeout": "soon"}, "could not convert"),
    ],
)
def test_refused_requests_say_why(kwargs, words):
    with pytest.raises(ValueError, match=words):
        horovod.spark.run(print, **kwargs)


def test_without_a_spark_context_the_error_says_a_classic_one_is_needed(monkeypatch):
    pytest.importorskip("pyspark")
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    with pytest.raises(SparkSetupError, match="needs a classic SparkContext.*none is running"):
        horovod.spark.run(print)
    monkeypatch.setenv("SPARK_REMOTE", "sc://localhost")
    with pytest.raises(SparkSetupError, match="Spark Connect session, which has no SparkContext"):
        horovod.spark.run(print)


def _relay():
    out, err = io.StringIO(), io.StringIO()
    driver = relay.DriverRelay("127.0.0.1", "t0ken", out, err)
    return driver, driver.start(), out, err


def test_the_relay_prints_each_ranks_lines_with_upstreams_prefix():
    driver, port, out, err = _relay()
    with relay.connect("127.0.0.1", port, "t0ken", 1, 5) as link:
        split = relay.LineSplitter(relay.STDOUT, link.send_line)
        split.feed(b"one\ntw")
        split.feed(b"o\nx" * 1 + b"y" * (relay.MAX_LINE + 5))
        split.feed(b"")
        link.send_line(relay.STDERR, b"oops")
    driver.close(expected=1)
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["[1]<stdout>:one", "[1]<stdout>:two"]
    # A line longer than MAX_LINE arrives cut into pieces of at most that size.
    assert [len(line) - len("[1]<stdout>:") for line in lines[2:]] == [relay.MAX_LINE, 6]
    assert err.getvalue() == "[1]<stderr>:oops\n"


def test_the_relay_ignores_strangers_and_stops_the_others_at_the_first_failure():
    driver, port, out, _ = _relay()
    with socket.create_connection(("127.0.0.1", port)) as stranger:
        stranger.sendall(b"HELLO wrong 0 h\nO not printed\n")
        stranger.settimeout(5)
        assert stranger.recv(10) == b""  # closed on the wrong token
    with (
        relay.connect("127.0.0.1", port, "t0ken", 0, 5) as rank0,
        relay.connect("127.0.0.1", port, "t0ken", 1, 5) as rank1,
    ):
        rank0.send_line(relay.STDOUT, b"before")
        deadline = time.monotonic() + 5
        while "before" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        rank1.send_failure()
        rank0.sock.settimeout(5)
        assert rank0.sock.recv(10) == relay.STOP + b"\n"
    driver.close(expected=2)
    assert driver.failures == [1]
    assert out.getvalue() == "[0]<stdout>:before\n"
    assert not driver.thread.is_alive()


def test_the_relay_names_a_task_whose_connection_ends_without_its_last_word():
    driver, port, _, _ = _relay()
    with relay.connect("127.0.0.1", port, "t0ken", 0, 5, "host-a") as done:
        done.send_end()
    with relay.connect("127.0.0.1", port, "t0ken", 1, 5, "host-b"):
        pass  # closed without END: its worker died
    assert driver.news.wait(5)
    deadline = time.monotonic() + 5
    while len(driver.finished) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert driver.lost == [1]
    assert driver.hosts == {0: "host-a", 1: "host-b"}
    driver.close(expected=2)


def test_the_root_cause_is_the_rank_that_raised_not_a_peer_shut_down_after_it():
    """Rank 2 raised and exited; rank 1 then failed with the engine's shutdown error, and its
    word reached the driver first: rank 2 is the one named."""
    from pyspark import cloudpickle

    from horovod.spark.runner import root_cause

    def record(rank, kind):
        outcome = {"ok": False, "type": kind, "text": "", "traceback": "", "exception": None}
        return {"rank": rank, "host": "h", "stopped": None, "ok": False,
                "result": cloudpickle.dumps(outcome), "exit_code": 1}  # fmt: skip

    failed = [record(1, "horovod.common.exceptions.HorovodShutdownError"),
              record(2, "builtins.ValueError")]  # fmt: skip
    assert root_cause(failed, failures=[1, 2])["rank"] == 2


def test_the_root_cause_is_not_a_rank_whose_fn_returned_before_the_stop():
    """Rank 1 exited with code 7 (no result); rank 0's fn had returned when the driver's STOP
    reached it, so its record failed with a good outcome: rank 1 is named, by its exit code."""
    from pyspark import cloudpickle

    from horovod.spark.runner import rank_error, root_cause

    good = cloudpickle.dumps({"ok": True, "value": b""})
    returned = {"rank": 0, "host": "h", "stopped": "the driver stopped it", "ok": False,
                "result": good, "exit_code": None}  # fmt: skip
    exited = {"rank": 1, "host": "h", "stopped": None, "ok": False, "result": None,
              "exit_code": 7}  # fmt: skip
    cause = root_cause([returned, exited], failures=[1])
    assert cause["rank"] == 1
    assert "rank 1 of 2 (host h) exited with code 7" in str(rank_error(cause, 2))
