"""A TCP world re-formed in the same processes (elastic training without relaunching): after
hvd.shutdown(), or after a peer's death ended the engine, hvd.init() forms a new world from the
environment at that moment. Plain processes with torchrun's variables (tests/support/tcp.py),
the ranks' side in tcp_reform_jobs.py; every test asserts each rank's lines, a time bound, and
that nothing of a past world stays open (fds, threads) and no process outlives the job. MPI's
refusal is test_lifecycle.py's (test_no_init_after_shutdown_over_mpi).
"""

import json
import re

from tests.engine.test_tcp_faults import finish
from tests.support import tcp
from tests.support.paths import ROOT

JOBS = ROOT / "tests" / "engine" / "tcp_reform_jobs.py"


def lines(out, tag):
    return re.findall(rf"^{tag} (.*)$", out, re.M)


def resources(out):
    """{when: (fds, threads)} of one rank's RESOURCES lines."""
    found = re.findall(r"^RESOURCES (\w+) fds=(\d+) threads=(\d+)$", out, re.M)
    return {when: (int(fds), int(threads)) for when, fds, threads in found}


def timeline_tensors(path):
    """The tensors a timeline file names (its process_name rows), from a complete JSON file."""
    events = json.loads(path.read_text())
    return {e["args"]["name"] for e in events if e.get("name") == "process_name"}


def test_three_ranks_reform_as_two(tmp_path):
    """3 ranks allreduce and add a process set; all shut down; rank 2 ends and ranks 0 and 1
    form a world of 2 on a new rendezvous: ranks, size, results, counted op names and the
    response cache are the new world's, the old process set is gone, each world has its own
    timeline and summary, and no fd or thread is left after either shutdown."""
    a, b = tcp.free_port(pair=True), tcp.free_port(pair=True)
    env = {"HOROVOD_TIMELINE": str(tmp_path / "timeline1.json"), "HOROVOD_SUMMARY": "1"}
    envs = [{**tcp.torchrun_env(r, 3, a), **env} for r in range(3)]
    o = finish(tcp.start(envs, [JOBS, "reform", a, b]), 60)
    assert o.rcs == [0, 0, 0], o.report
    for r in range(3):
        assert f"1 rank={r} size=3" in lines(o.outs[r], "WORLD"), o.report
        assert f"1 rank={r} ok" in lines(o.outs[r], "SUM"), o.report
        assert f"rank={r}" in lines(o.outs[r], "DONE"), o.report
        used = resources(o.outs[r])
        assert used["after1"] == used["start"], f"rank {r}: {used}\n{o.report}"
    for r in (0, 1):
        assert f"2 rank={r} size=2" in lines(o.outs[r], "WORLD"), o.report
        assert f"2 rank={r} ok" in lines(o.outs[r], "SUM"), o.report
        assert resources(o.outs[r])["after2"] == resources(o.outs[r])["start"], o.report
        (old,) = lines(o.outs[r], "OLDSET")
        assert old.startswith(f"rank={r} ") and "does not exist in the engine" in old, o.report
    assert "WORLD 2" not in o.outs[2], o.report
    summaries = re.findall(r"\[horovod summary\] (\d) ranks on 1 host over tcp", o.errs[0])
    assert summaries == ["3", "2"], o.report
    first, second = (timeline_tensors(tmp_path / f"timeline{w}.json") for w in (1, 2))
    assert "reform/world1" in first and "reform/world2" not in first, first
    assert "reform/world2" in second and "reform/world1" not in second, second
    assert o.seconds < 30, o.report


def test_survivors_reform_with_a_newcomer_after_a_peer_is_killed():
    """Rank 2 SIGKILLs itself: ranks 0 and 1 get HorovodInternalError naming it, then re-init
    (rank 0 after hvd.shutdown(), rank 1 straight away) with a new process as rank 2 on a new
    rendezvous; the three allreduce correctly and the survivors end with the fds and threads
    they started with."""
    a, b = tcp.free_port(pair=True), tcp.free_port(pair=True)
    first = tcp.start([tcp.torchrun_env(r, 3, a) for r in range(3)], [JOBS, "killed", a, b])
    newcomer_env = {**tcp.torchrun_env(2, 3, b), "HOROVOD_RENDEZVOUS_TIMEOUT": "30"}
    newcomer = tcp.start([newcomer_env], [JOBS, "newcomer", b])
    job = tcp.Job(first.procs + newcomer.procs, first.files + newcomer.files, "killed")
    o = finish(job, 60)
    assert o.rcs == [0, 0, -9, 0], o.report
    for r in (0, 1):
        (err,) = lines(o.outs[r], "ERROR 1")
        m = re.fullmatch(rf"rank={r} after ([\d.]+) s HorovodInternalError: (.*)", err)
        assert m and "rank 2" in m.group(2) and float(m.group(1)) < 5, o.report
        assert f"2 rank={r} size=3" in lines(o.outs[r], "WORLD"), o.report
        assert f"2 rank={r} ok" in lines(o.outs[r], "SUM"), o.report
        used = resources(o.outs[r])
        assert used["after2"] == used["start"], f"rank {r}: {used}\n{o.report}"
    assert "2 rank=2 size=3" in lines(o.outs[3], "WORLD"), o.report
    assert "2 rank=2 ok" in lines(o.outs[3], "SUM"), o.report
    assert o.seconds < 30, o.report


def test_reinit_into_a_world_where_a_rank_never_comes():
    """2 ranks re-init into a world of 3 whose rank 2 never comes: both fail within
    HOROVOD_RENDEZVOUS_TIMEOUT naming rank 2, and can still form a world of 2 afterwards."""
    a, b, c = (tcp.free_port(pair=True) for _ in range(3))
    envs = [{**tcp.torchrun_env(r, 2, a), "HOROVOD_RENDEZVOUS_TIMEOUT": "3"} for r in range(2)]
    o = finish(tcp.start(envs, [JOBS, "missing", a, b, c]), 40)
    assert o.rcs == [0, 0], o.report
    for r in (0, 1):
        (err,) = lines(o.outs[r], "INIT ERROR 2")
        m = re.fullmatch(r"after ([\d.]+) s HorovodInternalError: (.*)", err)
        assert m, o.report
        assert "timed out after 3 s with 2 of 3 ranks registered; missing: rank 2" in m.group(2)
        assert 2.5 < float(m.group(1)) < 8, o.report
        assert f"3 rank={r} size=2" in lines(o.outs[r], "WORLD"), o.report
        assert f"3 rank={r} ok" in lines(o.outs[r], "SUM"), o.report
        assert resources(o.outs[r])["after3"] == resources(o.outs[r])["after1"], o.report
    assert o.seconds < 20, o.report
