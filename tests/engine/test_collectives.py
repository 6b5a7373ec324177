"""Every collective x dtype x 1-3 dims x reduce op against NumPy, on 2 and 3 ranks."""

import re

import pytest

from tests.support.mpi import ENGINE

SMALL_CHUNKS = {"HOROVOD_RING_CHUNK_BYTES": "4096"}  # many pipelined chunks per ring step


@pytest.mark.parametrize(
    "scenario",
    [
        "allreduce",
        "allgather",
        "broadcast",
        "alltoall",
        "reducescatter",
        "grouped",
        "order",
        "steady",
        "bool_moves",
    ],
)
def test_collective(world, scenario):
    ENGINE.run_ok(world, scenario, env=SMALL_CHUNKS)


def test_fused_ring_over_the_tensors(world):
    """Small chunks and no direct exchange: every fused response runs the ring over the tensors
    with chunks and segments across their boundaries."""
    ENGINE.run_ok(
        world, "fused_over_tensors", env={"HOROVOD_SMALL_ALLREDUCE_BYTES": "0", **SMALL_CHUNKS}
    )


def test_fused_ring_own_messages(world):
    """Chunks larger than the reduce-scatter's own-message floor (128 KiB): pieces of a tensor
    above it travel as messages of their own, the smaller ones between them packed together."""
    ENGINE.run_ok(
        world,
        "fused_over_tensors",
        env={"HOROVOD_SMALL_ALLREDUCE_BYTES": "0", "HOROVOD_RING_CHUNK_BYTES": str(512 << 10)},
    )


def test_allreduce_ring_for_small_tensors(world):
    """Small tensors normally take the one-step direct exchange; force the ring for them too."""
    ENGINE.run_ok(world, "allreduce", env={"HOROVOD_SMALL_ALLREDUCE_BYTES": "0", **SMALL_CHUNKS})


def test_allreduce_mpi_baseline(world):
    """HOROVOD_CPU_OPERATIONS=mpi (MPI_Allreduce) gives the same answers as the ring."""
    ENGINE.run_ok(world, "allreduce", env={"HOROVOD_CPU_OPERATIONS": "mpi"})


def test_allreduce_without_cache(world):
    ENGINE.run_ok(world, "steady", env={"HOROVOD_CACHE_CAPACITY": "0"})


def test_allreduce_tiny_cache_evicts(world):
    """A cache smaller than the working set evicts every step; results stay right."""
    ENGINE.run_ok(world, "steady", env={"HOROVOD_CACHE_CAPACITY": "3"})


def digests(out):
    return sorted(re.findall(r"DIGEST rank=\d+ ([0-9a-f]{64})", out))


def test_fusion_on_and_off_identical(world):
    on, _ = ENGINE.run_ok(world, "fusion_digest", env={"HOROVOD_FUSION_THRESHOLD": str(64 << 20)})
    off, _ = ENGINE.run_ok(world, "fusion_digest", env={"HOROVOD_FUSION_THRESHOLD": "0"})
    assert len(set(digests(on))) == 1, "ranks disagree"
    assert digests(on) == digests(off), "fusion changed the results"


def test_single_process_without_mpirun():
    p = ENGINE.run_single("allreduce", timeout=120)
    assert p.returncode == 0 and "OK allreduce rank=0" in p.stdout, p.stdout + p.stderr


def test_bad_config_is_a_clear_error():
    rc, out, err = ENGINE.launch(2, "topology", env={"HOROVOD_CPU_OPERATIONS": "gloo"}, timeout=60)
    assert rc != 0 and "HOROVOD_CPU_OPERATIONS" in err


def eager_runs(err):
    m = re.search(r"\[horovod summary\] algorithms: allreduce [^;]*", err)
    assert m, err
    found = re.search(r"eager (\d+)", m.group(0))
    return int(found.group(1)) if found else 0


def test_eager_allreduce(world):
    """Cached small allreduces reduced from the data sent with the negotiation round: right for
    every dtype and op, and the summary counts them."""
    _, err = ENGINE.run_ok(world, "eager", env={"HOROVOD_SUMMARY": "1"})
    assert eager_runs(err) > 0, err


def test_eager_allreduce_off(world):
    """HOROVOD_EAGER_ALLREDUCE_BYTES=0: the bit-vector rounds and the operations, same results."""
    _, err = ENGINE.run_ok(
        world, "eager", env={"HOROVOD_SUMMARY": "1", "HOROVOD_EAGER_ALLREDUCE_BYTES": "0"}
    )
    assert eager_runs(err) == 0, err
