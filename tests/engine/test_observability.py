"""Timeline file and stall inspector."""

import json
import re

from tests.support.mpi import ENGINE


def test_timeline_is_valid_chrome_trace(tmp_path, world):
    path = tmp_path / "timeline.json"
    ENGINE.run_ok(world, "timeline", env={"HOROVOD_TIMELINE": str(path)})
    events = json.loads(path.read_text())
    assert isinstance(events, list) and events
    rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {"tl.0", "tl.1", "tl/single", "tl/big", "tl/bcast"} <= set(rows.values())
    names = [e["name"] for e in events]
    for span in (
        "NEGOTIATE_ALLREDUCE",
        "ALLREDUCE",
        "RING_ALLREDUCE",
        "DIRECT_ALLREDUCE",
        "MEMCPY_IN_FUSION_BUFFER",
        "MEMCPY_OUT_FUSION_BUFFER",
        "NEGOTIATE_BROADCAST",
        "BROADCAST",
        "MPI_BCAST",
    ):
        assert span in names, f"{span} missing"
    fused_ring = {pid for pid, name in rows.items() if name.startswith("tl/fring")}
    spans = {e["name"] for e in events if e.get("pid") in fused_ring}
    assert "RING_ALLREDUCE" in spans and "MEMCPY_IN_FUSION_BUFFER" not in spans, spans
    # Cached from the second step on, the small one's data travels with the negotiation round.
    single = {pid for pid, name in rows.items() if name == "tl/single"}
    spans = [e["name"] for e in events if e.get("pid") in single]
    assert "EAGER_ALLREDUCE" in spans and "NEGOTIATE_ALLREDUCE" in spans, spans
    ticks = {e["name"] for e in events if e["ph"] == "X"}
    assert {str(r) for r in range(world)} <= ticks, "one negotiation tick per rank"
    for pid in rows:  # every span that begins also ends
        phases = [e["ph"] for e in events if e.get("pid") == pid and e["ph"] in "BE"]
        assert phases.count("B") == phases.count("E"), rows[pid]


def test_timeline_of_a_short_job_holds_its_op(tmp_path, world):
    # The job ends about 0.1 s after init: the file is still complete and valid JSON.
    path = tmp_path / "timeline.json"
    ENGINE.run_ok(world, "timeline_short", env={"HOROVOD_TIMELINE": str(path)})
    events = json.loads(path.read_text())
    rows = {e["pid"] for e in events if e.get("args", {}).get("name") == "tl/short"}
    assert rows, events
    names = [e["name"] for e in events if e.get("pid") in rows]
    assert "NEGOTIATE_ALLREDUCE" in names and "ALLREDUCE" in names, names
    assert not [e for e in events if e["name"] == "CYCLE_START"], "cycles marked unasked"


def test_timeline_holds_an_op_while_the_job_runs(tmp_path, world):
    # Rank 0 reads the file after the op, before shutdown (scenarios_observability.py).
    path = tmp_path / "timeline.json"
    ENGINE.run_ok(world, "timeline_live", env={"HOROVOD_TIMELINE": str(path)})
    json.loads(path.read_text())  # and complete after shutdown


def test_timeline_mark_cycles(tmp_path, world):
    path = tmp_path / "timeline.json"
    env = {"HOROVOD_TIMELINE": str(path), "HOROVOD_TIMELINE_MARK_CYCLES": "1"}
    ENGINE.run_ok(world, "timeline_short", env=env)
    events = json.loads(path.read_text())
    cycles = [e for e in events if e["name"] == "CYCLE_START"]
    assert cycles and all(e["ph"] == "i" for e in cycles), events
    op = next(
        e["ts"] for e in events if e["name"] == "ALLREDUCE" and e["ph"] == "B"
    )  # the round that ran the op is marked before it
    assert any(e["ts"] <= op for e in cycles), (cycles, op)


def test_stall_warning_names_missing_rank(world):
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1"}
    _, err = ENGINE.run_ok(world, "stall_warning", env=env, timeout=90)
    assert "Stall inspector" in err, err
    for tensor in ("stall/uncached", "stall/cached"):
        lines = [ln for ln in err.splitlines() if f"'{tensor}'" in ln]
        assert lines and all("rank [1]" in ln for ln in lines), f"{tensor}:\n{err}"


def test_stall_shutdown_fails_pending_ops_on_all_ranks(world):
    # Since issue 17 (item 9) the job then ends with MPI_Abort, so mpirun's status is not 0.
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "2"}
    rc, out, err = ENGINE.launch(world, "stall_shutdown", env=env, timeout=90)
    got = {int(r) for r in re.findall(r"GOT STALL ERROR rank=(\d+)", out)}
    assert rc != 0 and got == set(range(world)), f"rc={rc}\n{out}\n{err}"
    assert "ending the job with MPI_Abort" in err, err
