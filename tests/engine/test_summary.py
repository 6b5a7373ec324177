"""The end-of-job communication summary rank 0 prints at shutdown (HOROVOD_SUMMARY)."""

import re

from tests.support.mpi import ENGINE, ok_ranks

PREFIX = "[horovod summary] "
# sc_known_job reduces 10 x 1 MiB of float32 and 4 x 1000 float64 on every rank.
KNOWN_BYTES_REDUCED = 10 * (1 << 20) + 4 * 1000 * 8
KNOWN_TENSORS = 10 + 4 + 1 + 1  # the allreduces, the group, the broadcast, the allgather
KNOWN_COLLECTIVES = 10 + 1 + 1 + 1  # the group runs as one fused allreduce


def summary(err):
    return [ln[len(PREFIX) :] for ln in err.splitlines() if ln.startswith(PREFIX)]


def percent(text, label):
    m = re.search(rf"{label} ([\d.]+) %", text)
    assert m, f"no '{label} N %' in {text!r}"
    value = float(m.group(1))
    assert 0 <= value <= 100, text
    return value


def test_summary_of_a_known_job(world):
    _, err = ENGINE.run_ok(world, "known_job")
    lines = summary(err)
    # One block, from one rank: the job line, the time line, the algorithms, the slowest rank.
    assert len(lines) == 4, err
    job, times, algorithms, slowest = lines
    m = re.fullmatch(
        rf"{world} ranks on 1 host over mpi, [\d.]+ s: (\d+) collectives \((\d+) tensors\); "
        r"(\d+) bytes reduced per rank \(10\.0 MiB\)",
        job,
    )
    assert m, job
    collectives, tensors, reduced = map(int, m.groups())
    assert reduced == KNOWN_BYTES_REDUCED, job
    assert tensors == KNOWN_TENSORS, job
    assert KNOWN_COLLECTIVES <= collectives <= KNOWN_TENSORS, job
    assert percent(times, "time in collectives") > 0, times
    percent(times, r"\(plus negotiation")
    assert re.search(r"median over ranks; allreduce bus bandwidth [\d.e-]+ GB/s$", times), times
    # 1 MiB tensors take the ring, the 1000-element group the direct exchange; one host.
    assert re.fullmatch(
        r"algorithms: allreduce direct \d+, ring \d+; allgather ring 1; hierarchical allreduce "
        rf"off \(1 host\(s\) x {world} rank\(s\): nothing to gain over the flat ring\), "
        r"allgather off \(.*\)",
        algorithms,
    ), algorithms
    assert re.fullmatch(
        r"slowest rank: \d on \S+ \(waited [\d.]+ % of its time in collectives "
        r"and negotiation, median [\d.]+ %\): .+",
        slowest,
    ), slowest


def test_summary_off_prints_nothing(world):
    _, err = ENGINE.run_ok(world, "known_job", env={"HOROVOD_SUMMARY": "0"})
    assert "[horovod summary]" not in err, err


def test_summary_level_2_has_a_line_per_rank(world):
    _, err = ENGINE.run_ok(world, "known_job", env={"HOROVOD_SUMMARY": "2"})
    lines = summary(err)
    per_rank = [ln for ln in lines if ln.startswith("rank ")]
    assert len(lines) == 4 + world and lines[4:] == per_rank, err
    for r, ln in enumerate(per_rank):  # in rank order
        assert re.fullmatch(
            rf"rank {r} on \S+: \d+ collectives, {KNOWN_BYTES_REDUCED} bytes "
            r"reduced, collectives [\d.]+ % \(plus negotiation [\d.]+ %\), "
            r"allreduce busbw [\d.e-]+ GB/s",
            ln,
        ), ln


def test_bad_summary_value_is_refused_at_init():
    rc, out, err = ENGINE.launch(
        2,
        "config_error",
        "HOROVOD_SUMMARY='5'",
        "integer in [0, 2]",
        env={"HOROVOD_SUMMARY": "5"},
        timeout=60,
    )
    assert rc == 0 and ok_ranks(out, "config_error") == {0, 1}, out + err
    assert "[horovod summary]" not in err, err


def test_straggler_is_named_the_slowest_rank(world):
    _, err = ENGINE.run_ok(world, "straggler")
    lines = [ln for ln in summary(err) if ln.startswith("slowest rank:")]
    assert len(lines) == 1, err
    assert re.match(r"slowest rank: 1 on \S+ \(waited [\d.]+ %", lines[0]), lines[0]
    assert lines[0].endswith("the others wait for it"), lines[0]


def test_single_process_summary():
    p = ENGINE.run_single("known_job", timeout=120)
    assert p.returncode == 0 and "OK known_job rank=0" in p.stdout, p.stdout + p.stderr
    lines = summary(p.stderr)
    assert len(lines) == 2, p.stderr  # no slowest rank among one
    assert (
        lines[0].startswith("1 rank on 1 host over mpi,")
        and f"{KNOWN_BYTES_REDUCED} bytes" in lines[0]
    )
    assert lines[1].endswith("allreduce bus bandwidth n/a (1 rank)"), lines[1]


def test_measured_link_on_one_host_is_said_not_compared():
    # horovodrun passes the slowest link a --check-network measured (HOROVOD_LINK_GBPS); on one
    # host no link carries the allreduce, and the summary says so instead of a ratio.
    # (Several hosts: tests/unit/cpp/job_stats_test.cc and tests/cluster/test_network_check.py.)
    _, err = ENGINE.run_ok(2, "known_job", env={"HOROVOD_LINK_GBPS": "1.25"})
    lines = summary(err)
    assert len(lines) == 5, err
    assert lines[4] == (
        "links: slowest link 1.25 GB/s (HOROVOD_LINK_GBPS), but every rank ran on one host: "
        "no link carried the allreduce"
    ), lines[4]
