"""The engine suite's scenarios over the TCP transport: plain processes with torchrun's variables
(tests/support/tcp.py), no mpirun. One launch per rank count runs most of them (run_batch: the
scenarios one after another in one process per rank), so that the whole module takes seconds:

  np 2 and 3 (`world`): every op against NumPy (allreduce of every dtype and reduce op, with
    prescale/postscale, fused and many tensors, the ring in 4 KiB chunks over the Unix socket
    (np 2) and 64 KiB single-copy chunks (np 3), the direct exchange and
    the eager path; allgather, broadcast, alltoall, reducescatter, grouped ops), the response
    cache (repeated names, steady and order), errors named on every rank (mismatched shapes,
    dtypes, splits, arguments; sizes that overflow), process sets added and removed at run time,
    join, the frontends, Adasum (np 2; np 3: refused by name), idle CPU (np 3), with the timeline
    and the end-of-job summary of that launch checked too;
  np 4 as 2 hosts x 2 (HOROVOD_TOPOLOGY_RANKS_PER_HOST=2): hierarchical allreduce and allgather,
    process sets across the hosts, and Adasum;
  small launches of their own: the ops with no single copy, sets given to init (and init with
    sets that differ), knobs that differ between ranks, a rank that exits early, and a job of one
    rank.

Not run here, because they are about MPI rather than the engine over a transport:
  topology -> tcp_transport (tcp_scenarios.py): it asserts mpi_enabled();
  subcomm, reinit_other_comm: init(comm=...) takes an mpi4py communicator;
  ps_init, ps_init_mismatch, ps_init_fewer -> their *_tcp versions: mpi4py for a set's
    communicator or for the rank before init;
  log_rank: a warning about MPI's thread level (mpi4py initializes MPI);
  slow_local_step: an mpi4py barrier; over TCP the same case (a peer busy with local work,
    answering the watchdog's roll call over UDP) is test_tcp_faults.py's "busy" job;
  allreduce with HOROVOD_CPU_OPERATIONS=mpi: MPI_Allreduce;
  killed, stopped_rank, stopped_idle_rank, stall_shutdown, stall_exit: their tests assert
    Open MPI's report of a lost process, MPI_Abort, and mpirun ending a stopped rank (no TCP
    launcher here ends the others); over TCP a lost peer, and a stopped one named silent by
    the roll call, are test_tcp_faults.py's.
Left out for time only (they ran over TCP by hand: stall_warning, stall_shutdown): stall_warning
(7 s), stall_shutdown (7 s), dropped_handles, autotune, many_tensors, long_op_progressing and
the per-knob variants of test_hardening.py (one knob is here).
"""

import collections
import json
import re

import pytest

from tests.support.mpi import Program, ok_ranks
from tests.support.paths import ROOT

TCP = Program(ROOT / "tests" / "engine" / "tcp_scenarios.py")
GPU_CLAIM = "this build of Horovod has no GPU operations"  # sc_gpu_claim's argument (CPU build)

# Every rank count runs these, in this order (output_blocks first: it expects fresh blocks).
COMMON = [
    "tcp_transport",
    "output_blocks",
    "allreduce",
    "allgather",
    "broadcast",
    "alltoall",
    "reducescatter",
    "grouped",
    "order",
    "steady",
    "bool_moves",
    "fused_over_tensors",
    "eager",
    "int_average",
    "int_scale",
    "zero_width",
    "byteorder",
    "overlap",
    "blocking_calls",
    "threads",
    "mismatch",
    "alltoall_splits",
    "dtypes",
    "gpu_claim",
    "group_sizes",
    "one_rank_args",
    "size_overflow",
    "bad_args",
    "ps_collectives",
    "ps_errors",
    "ps_bad_ranks",
    "join_uneven",
    "join_other_ops",
    "join_gpu_tensor",
    "layer_collectives",
    "layer_process_set",
    "layer_bad_arguments",
    "timeline",
    "known_job",
]
# Adasum needs a power of two; idle_cpu takes 2.5 s, once is enough.
BY_WORLD = {
    2: ["adasum", "adasum_fused", "adasum_scaled", "adasum_refused", "adasum_join"],
    3: ["adasum_not_power_of_two", "idle_cpu"],
}
# Many pipelined chunks per ring step: many messages in flight on every connection. The ranks
# share a machine, so their links are Unix sockets: at np 2 the 4 KiB chunks cross the socket,
# at np 3 chunks of 64 KiB cross as single-copy descriptors (the receiver copies them out of the
# sender's memory; HOROVOD_TCP_SINGLE_COPY). test_socket_path_alone runs the ops with no single
# copy.
WORLD_ENV = {"HOROVOD_SUMMARY": "1"}
RING_CHUNK = {2: "4096", 3: "65536"}
SOCKET_ALONE = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "grouped"]

_batches = {}


@pytest.fixture
def batch(world, tmp_path_factory):
    """The launch of COMMON + BY_WORLD[world] on `world` ranks, with a timeline: once per rank
    count, shared by the tests of this module. Returns (Batch, timeline path)."""
    if world not in _batches:
        timeline = tmp_path_factory.mktemp(f"tcp{world}") / "timeline.json"
        env = {
            **WORLD_ENV,
            "HOROVOD_RING_CHUNK_BYTES": RING_CHUNK[world],
            "HOROVOD_TIMELINE": str(timeline),
        }
        names = COMMON + BY_WORLD[world]
        _batches[world] = (
            TCP.run_batch(world, names, GPU_CLAIM, env=env, transport="tcp", timeout=240),
            timeline,
        )
    return _batches[world]


@pytest.mark.parametrize("scenario", COMMON)
def test_scenario(batch, scenario):
    batch[0].check(scenario)


def test_scenarios_of_this_rank_count(batch):
    b = batch[0]
    for name in BY_WORLD[b.np]:
        b.check(name)
    assert b.rc == 0, f"rc={b.rc}\n{b.err[-3000:]}"


def test_timeline_says_tcp(batch):
    """The timeline's first event labels the job's transport; the ops' rows and spans follow."""
    b, path = batch
    b.check("timeline")
    events = json.loads(path.read_text())
    assert events[0] == {
        "name": "process_labels",
        "ph": "M",
        "pid": 0,
        "args": {"labels": "transport: tcp"},
    }, events[:3]
    rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {"tl.0", "tl.1", "tl/single", "tl/big", "tl/bcast"} <= set(rows.values())
    names = {e["name"] for e in events}
    for span in (
        "NEGOTIATE_ALLREDUCE",
        "ALLREDUCE",
        "RING_ALLREDUCE",
        "DIRECT_ALLREDUCE",
        "EAGER_ALLREDUCE",
        "MEMCPY_IN_FUSION_BUFFER",
        "MEMCPY_OUT_FUSION_BUFFER",
        "NEGOTIATE_BROADCAST",
        "BROADCAST",  # its activity is named MPI_BCAST over TCP too (not asserted here)
    ):
        assert span in names, f"{span} missing"
    ticks = {e["name"] for e in events if e["ph"] == "X"}
    assert {str(r) for r in range(b.np)} <= ticks, "one negotiation tick per rank"
    opened = collections.Counter(e["pid"] for e in events if e["ph"] == "B")
    closed = collections.Counter(e["pid"] for e in events if e["ph"] == "E")
    assert opened == closed, "a span that begins and never ends"


def test_summary_says_tcp(batch):
    b = batch[0]
    b.check("known_job")
    lines = [ln for ln in b.err.splitlines() if ln.startswith("[horovod summary] ")]
    assert len(lines) == 4, b.err[-3000:]
    assert re.fullmatch(
        rf"\[horovod summary\] {b.np} ranks on 1 host over tcp, [\d.]+ s: \d+ collectives "
        r"\(\d+ tensors\); .*bytes reduced per rank.*",
        lines[0],
    ), lines[0]
    assert lines[2].startswith("[horovod summary] algorithms: allreduce direct"), lines[2]


# -- 2 hosts x 2 ranks --------------------------------------------------------------------------

HOSTS = [
    "host_topology",
    "allreduce",
    "allgather",
    "uneven_sizes",
    "grouped_fused",
    "allgather_rows",
    "pipelined_blocks",
    "ps_collectives",
    "adasum",
    "adasum_fused",
    "adasum_scaled",
    "adasum_refused",
    "adasum_join",
]


def test_two_hosts_of_two(tmp_path):
    """Hierarchical allreduce (pipelined blocks too) and allgather over the fake hosts, sets
    across them, and Adasum; the summary and the timeline say that the two levels ran."""
    timeline = tmp_path / "timeline.json"
    env = {
        "HOROVOD_TOPOLOGY_RANKS_PER_HOST": "2",
        "HOROVOD_SMALL_ALLREDUCE_BYTES": "0",  # below the direct exchange's size too
        "HOROVOD_TIMELINE": str(timeline),
    }
    b = TCP.run_batch(4, HOSTS, env=env, transport="tcp", timeout=240)
    for name in HOSTS:
        b.check(name)
    assert b.rc == 0, b.err[-3000:]
    line = next(ln for ln in b.err.splitlines() if ln.startswith("[horovod summary] algor"))
    assert re.search(r"allreduce Adasum \d+, hierarchical \d+; allgather hierarchical", line), line
    assert "hierarchical allreduce on (2 host(s) x 2 rank(s))" in line, line
    text = timeline.read_text()
    assert '"HIERARCHICAL_ALLREDUCE"' in text and '"HIERARCHICAL_ALLGATHER"' in text
    assert "transport: tcp" in text


# -- launches of their own ----------------------------------------------------------------------


def test_socket_path_alone():
    """Every message through the Unix sockets between the ranks (no single copy), in 1 MiB
    chunks: the path of ranks that may not read each other's memory."""
    env = {"HOROVOD_TCP_SINGLE_COPY": "0"}
    b = TCP.run_batch(2, SOCKET_ALONE, GPU_CLAIM, env=env, transport="tcp", timeout=120)
    for name in SOCKET_ALONE:
        b.check(name)
    assert b.rc == 0, b.err[-3000:]


def test_sets_given_to_init_and_removed(world):
    TCP.run_ok(world, "ps_init_tcp", transport="tcp", timeout=60)


@pytest.mark.parametrize("scenario", ["ps_init_mismatch_tcp", "ps_init_fewer_tcp"])
def test_init_with_different_sets_fails_on_every_rank(scenario):
    TCP.run_ok(3, scenario, transport="tcp", timeout=60)


def test_knob_set_differently_fails_init_on_every_rank():
    """Init's agreement on the knobs runs over TCP too: every rank names the knob and values."""
    knob = "HOROVOD_CACHE_CAPACITY"
    rc, out, err = TCP.launch(
        3,
        "config_error",
        knob,
        "rank 1 has '64'",
        "ranks [0, 2] have '1024'",
        transport="tcp",
        per_rank_env=[{knob: "1024"}, {knob: "64"}, {knob: "1024"}],
        timeout=60,
    )
    assert rc == 0 and ok_ranks(out, "config_error") == {0, 1, 2}, out + err


def test_rank_that_exits_early_fails_the_others_with_its_name():
    rc, out, err = TCP.launch(3, "early_exit", transport="tcp", timeout=60)
    assert rc == 0 and ok_ranks(out, "early_exit") == {0, 1, 2}, f"rc={rc}\n{out}\n{err}"
    assert "rank [1] called shutdown() or exited" in err, err


def test_job_of_one_rank():
    """WORLD_SIZE=1: rank 0 meets only itself at its rendezvous."""
    b = TCP.run_batch(1, ["tcp_transport", "allreduce", "grouped"], transport="tcp", timeout=60)
    for name in b.names:
        b.check(name)
    assert "[horovod summary] 1 rank on 1 host over tcp," in b.err, b.err
