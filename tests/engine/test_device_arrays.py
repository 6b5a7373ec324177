"""Device arrays in the CPU build (horovod/common/device.py): CuPy-like and torch-like
stand-ins (tests/support/fakelib.py) reach the engine, which refuses them on every rank, naming the
tensor and saying the build has no GPU operations; the job goes on."""

import numpy as np
import pytest

from tests.support import mpi
from tests.support.paths import ROOT

CHECKS = mpi.Program(ROOT / "tests" / "gpu" / "device_checks.py", timeout=180)


@pytest.mark.parametrize("np_", [2, 3])
def test_device_arrays_refused_on_every_rank_in_cpu_build(np_):
    CHECKS.run_ok(np_, "refused", "this build of Horovod has no GPU operations")
    CHECKS.run_ok(np_, "local_refusals")


# In-process: what the frontend reads of each protocol, before the engine sees it.


def test_describe_reads_the_cuda_array_interface():
    from horovod.common import device
    from tests.support import fakelib

    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = fakelib.CupyLike(host)
    t = device.describe("x", x)
    assert (t.ptr, t.shape, t.dtype, t.device, t.stream) == (
        x._host.ctypes.data,
        (2, 3),
        device.FLOAT32,
        0,
        1,
    )
    assert t.library is fakelib and t.owner is x


def test_describe_reads_dlpack_and_keeps_the_capsule():
    from horovod.common import device
    from tests.support import fakelib

    x = fakelib.TorchLike(np.ones((4, 2), np.int64))
    t = device.describe("x", x)
    assert (t.ptr, t.shape, t.dtype, t.device, t.stream) == (
        x._host.ctypes.data,
        (4, 2),
        device.INT64,
        0,
        1,
    )
    assert t.owner[0] is x and type(t.owner[1]).__name__ == "PyCapsule"


def test_outputs_are_the_inputs_kind():
    from horovod.common import device
    from tests.support import fakelib

    for mk in (fakelib.CupyLike, fakelib.TorchLike):
        t = device.describe("x", mk(np.ones(3, np.float32)))
        obj, ptr = device.output_for("x", t, None)
        assert type(obj) is mk and ptr == obj._host.ctypes.data and ptr != t.ptr
        assert device.result(t, obj) is obj
        with pytest.raises(ValueError, match="input's dtype and shape"):
            device.output_for("x", t, mk(np.ones(4, np.float32)))


def test_host_and_non_cuda_objects_are_not_device_arrays():
    from horovod.common import device
    from tests.support import fakelib

    assert not device.is_device_array(np.ones(2))
    assert not device.is_device_array([1, 2])
    assert not device.is_device_array(fakelib.TorchLike(np.ones(2), device_type=1))  # kDLCPU
    assert device.is_device_array(fakelib.TorchLike(np.ones(2), device_type=8))  # refused later


@pytest.mark.parametrize("np_", [1, 2, 3])
def test_gpu_checks_expectations_hold_on_host_arrays(np_):
    """tests/gpu/device_checks.py's `collectives` with NumPy arrays in place of device ones:
    its references (uneven allgather, alltoall, reducescatter rows) are right before a GPU
    ever runs them."""
    out, _ = CHECKS.run_ok(np_, "collectives", env={"HVD_DEVICE_LIB": "numpy"})
    assert out.count("PASS ") >= 20 * np_, out


def test_gpu_bench_flow_on_host_arrays():
    """The benchmark's flow (sizes, timing, peer, the summary line), with MPI standing in for
    NCCL and host arrays for device ones: no figure, only that it runs to its last line."""
    env = {"HVD_DEVICE_LIB": "numpy", "HVD_BENCH_MAX_BYTES": str(1 << 20)}
    out, _ = CHECKS.run_ok(2, "bench", env=env)
    assert out.count("BENCH ") == 6 and "BENCH largest 1048576 bytes" in out, out
