"""horovod: our package, built in the builder stage, works under mpirun in the runtime image."""
import re

import pytest

pytestmark = pytest.mark.layer("horovod")


def test_check_build(host, pins, run_ok):
    out = run_ok(host, "horovodrun --check-build")
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert pins["HOROVOD_VERSION"] in rows["Horovod"]
    assert re.search(r"\[X\]\s+Open MPI v" + re.escape(pins["OPENMPI_VERSION"]), rows["MPI"])
    assert "[ ]" in rows["NCCL"] and "[ ]" in rows["Gloo"]
    tf_version = pins["TENSORFLOW_VERSION"]
    assert re.search(rf"\[X\]\s+{re.escape(tf_version)} \(frontend built against {re.escape(tf_version)}\)$",
                     rows["TensorFlow"]), rows["TensorFlow"]
    assert f"{pins['MPI4PY_VERSION']} installed" in rows["mpi4py"]
    # The image's ENV pins, echoed by check-build, agree with versions.env.
    for key in ("HOROVOD_VERSION", "OPENMPI_VERSION", "TENSORFLOW_VERSION", "PYTHON_VERSION"):
        assert f"{key}={pins[key]}" in rows["image pins"]


def test_selftest_as_documented(client, ref):
    """`docker run --rm horovod:latest mpirun -np 2 python -m horovod.selftest`"""
    # containers.run raises ContainerError (with the output) on a non-zero exit.
    client.containers.run(ref, ["mpirun", "-np", "2", "python", "-m", "horovod.selftest"],
                          remove=True)


def test_selftest_through_horovodrun_as_mpiuser(user_host, run_ok):
    run_ok(user_host, "horovodrun -np 2 python -m horovod.selftest")


def test_tensorflow_ops_across_two_ranks(host, run_ok):
    """The TF ops compiled in the builder load in the runtime and reduce across ranks, on the
    same engine as the NumPy frontend."""
    code = ("import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'; import tensorflow as tf; "
            "import horovod.tensorflow as hvd, horovod.numpy as hnp; hvd.init(); "
            "t = hvd.allreduce(tf.fill([3], float(hvd.rank() + 1)), op=hvd.Sum); "
            "a = hnp.allreduce(__import__('numpy').ones(3), op=hnp.Sum); "
            "print('SUM', t.numpy().tolist(), a.tolist())")
    out = run_ok(host, f'horovodrun -np 2 python -c "{code}"')
    assert out.count("SUM [3.0, 3.0, 3.0] [2.0, 2.0, 2.0]") == 2, out


def test_horovodrun_propagates_failure(host):
    cmd = "horovodrun -np 2 python -c 'import os, sys; sys.exit(int(os.environ[\"OMPI_COMM_WORLD_RANK\"]) + 4)'"
    assert host.run(cmd).rc in (4, 5)


def test_runtime_has_no_build_tools(host):
    for tool in ("g++", "cmake", "ninja"):
        assert not host.exists(tool), tool
    assert not host.file("/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h").exists
    assert not host.file("/src").exists


def test_examples_included(host):
    assert host.file("/opt/horovod/examples").is_directory
    assert host.file("/opt/horovod/examples").listdir()
