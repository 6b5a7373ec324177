"""Hierarchical allreduce and allgather (HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER) under
real MPI ranks, with HOROVOD_TOPOLOGY_RANKS_PER_HOST standing in for hosts: 2 hosts x 2 ranks,
3 x 2, and 2 + 1 ranks (not homogeneous: the flat ring runs and the log says why). Every dtype
and op against NumPy, as test_collectives.py does for the flat ring."""

import re

import pytest

from tests.support.mpi import ENGINE

SUMMARY = "[horovod summary] algorithms: "


def hosts(per_host, **extra):
    return {
        "HOROVOD_TOPOLOGY_RANKS_PER_HOST": str(per_host),
        "HOROVOD_RING_CHUNK_BYTES": "4096",  # many pipelined chunks per ring step
        **extra,
    }


def run(np_, names, env):
    """One launch of the scenarios `names` ("a,b"); every one must pass on every rank."""
    batch = ENGINE.run_batch(np_, names.split(","), env=env)
    for name in batch.names:
        batch.check(name)
    assert batch.rc == 0, batch.err
    return batch.err


def algorithms(err):
    lines = [ln[len(SUMMARY) :] for ln in err.splitlines() if ln.startswith(SUMMARY)]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("np_", [4, 6], ids=["2x2", "3x2"])
def test_every_dtype_and_op(np_):
    """auto turns it on (several hosts, two ranks each); below the direct exchange's size too,
    so that every case of the flat ring's suite runs hierarchically."""
    names = (
        "host_topology,allreduce,allgather,uneven_sizes,grouped_fused,allgather_rows,"
        "fused_over_tensors,pipelined_blocks"
    )
    err = run(np_, names, hosts(2, HOROVOD_SMALL_ALLREDUCE_BYTES="0"))
    line = algorithms(err)
    assert re.match(r"allreduce hierarchical \d+; allgather hierarchical \d+; ", line), line
    assert f"hierarchical allreduce on ({np_ // 2} host(s) x 2 rank(s))" in line, line


def test_auto_off_on_one_host():
    err = run(4, "host_topology,uneven_sizes", hosts(4))
    line = algorithms(err)
    assert "hierarchical" not in line.split(";")[0], line
    assert "hierarchical allreduce off (1 host(s) x 4 rank(s): nothing to gain" in line, line


def test_off_when_asked():
    err = run(
        4,
        "uneven_sizes,allgather_rows",
        hosts(2, HOROVOD_HIERARCHICAL_ALLREDUCE="0", HOROVOD_HIERARCHICAL_ALLGATHER="0"),
    )
    line = algorithms(err)
    assert line.startswith("allreduce direct") and "allgather ring" in line, line
    assert "hierarchical allreduce off (HOROVOD_HIERARCHICAL_ALLREDUCE=0)" in line, line


def test_uneven_hosts_fall_back_and_say_so():
    """2 + 1 ranks: asked for, refused with the reason on rank 0's log; results still right."""
    err = run(
        3,
        "host_topology,uneven_sizes,allgather_rows",
        hosts(2, HOROVOD_HIERARCHICAL_ALLREDUCE="1", HOROVOD_HIERARCHICAL_ALLGATHER="1"),
    )
    why = "hosts hold 1 to 2 ranks each; hierarchical needs the same number on every host"
    warnings = [ln for ln in err.splitlines() if "WARNING" in ln and why in ln]
    assert len(warnings) == 1, err
    line = algorithms(err)
    assert "allgather ring" in line and "hierarchical allreduce off (" + why in line, line


def test_forced_on_one_host_is_the_flat_ring_result():
    """'1' on one host: the two levels degenerate to one ring; results right."""
    err = run(
        3,
        "uneven_sizes,allgather_rows",
        hosts(3, HOROVOD_HIERARCHICAL_ALLREDUCE="1", HOROVOD_HIERARCHICAL_ALLGATHER="1"),
    )
    assert "hierarchical allreduce on (1 host(s) x 3 rank(s))" in algorithms(err)


def test_bad_value_is_refused_on_every_rank():
    rc, out, err = ENGINE.launch(
        2,
        "config_error",
        "HOROVOD_HIERARCHICAL_ALLREDUCE='yes'",
        "auto, 1 or 0",
        env={"HOROVOD_HIERARCHICAL_ALLREDUCE": "yes"},
        timeout=60,
    )
    assert rc == 0 and "OK config_error rank=1" in out, out + err


def test_process_sets_have_their_own_hosts():
    """Sets of even and odd ranks on 2 hosts x 2: each set spans both hosts with one rank on
    each, and forced on, its collectives run the two levels over its own members."""
    run(
        4,
        "ps_collectives",
        hosts(
            2,
            HOROVOD_HIERARCHICAL_ALLREDUCE="1",
            HOROVOD_HIERARCHICAL_ALLGATHER="1",
            HOROVOD_SMALL_ALLREDUCE_BYTES="0",
        ),
    )


def test_timeline_names_the_hierarchical_activities(tmp_path):
    path = tmp_path / "timeline.json"
    run(4, "uneven_sizes,allgather_rows", hosts(2, HOROVOD_TIMELINE=str(path)))
    text = path.read_text()
    assert '"HIERARCHICAL_ALLREDUCE"' in text and '"HIERARCHICAL_ALLGATHER"' in text, text[:2000]
    assert '"RING_ALLREDUCE"' not in text and '"RING_ALLGATHER"' not in text
