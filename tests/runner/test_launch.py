"""horovodrun: command construction (pure) and a real single-host launch when mpirun exists."""

import shutil
import sys

import pytest

from horovod.runner import check_build, launch


def cmd(argv, env=None, cpus=2, root=False):
    return launch.mpirun_command(launch.parse_args(argv), env or {}, cpus, root)


def test_basic_flags():
    assert cmd(["-np", "2", "python", "train.py", "--lr", "0.1"]) == [
        "mpirun",
        "-np",
        "2",
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "python",
        "train.py",
        "--lr",
        "0.1",
    ]


def test_root_and_oversubscribe():
    c = cmd(["-np", "4", "python", "t.py"], cpus=2, root=True)
    assert c[:2] == ["mpirun", "--allow-run-as-root"]
    assert "--oversubscribe" in c
    assert "--oversubscribe" not in cmd(["-np", "2", "python", "t.py"], cpus=2)


def test_default_np_is_cpu_count():
    c = cmd(["python", "t.py"], cpus=3)
    assert c[c.index("-np") + 1] == "3"


def test_env_forwarding():
    env = {
        "HOROVOD_FUSION_THRESHOLD": "1",
        "PYTHONPATH": "/x",
        "PATH": "/bin",
        "LD_LIBRARY_PATH": "/l",
        "NCCL_DEBUG": "INFO",
        "HOME": "/root",
        "SECRET": "s",
    }
    c = cmd(["-np", "1", "python", "t.py"], env=env)
    xs = [c[i + 1] for i, a in enumerate(c) if a == "-x"]
    assert xs == ["HOROVOD_FUSION_THRESHOLD", "LD_LIBRARY_PATH", "NCCL_DEBUG", "PATH", "PYTHONPATH"]


def test_mpi_args_come_before_the_program():
    c = cmd(["-np", "2", "--mpi-args", "--mca btl tcp,self", "python", "-V"])
    assert c[-5:] == ["--mca", "btl", "tcp,self", "python", "-V"]


def test_program_options_are_not_parsed():
    assert cmd(["-np", "2", "python", "t.py", "--verbose", "-np", "9"])[-5:] == [
        "python",
        "t.py",
        "--verbose",
        "-np",
        "9",
    ]


@pytest.mark.parametrize("argv", [[], ["-np", "2"], ["-np", "0", "python"]])
def test_usage_errors(argv):
    with pytest.raises(SystemExit) as e:
        launch.parse_args(argv)
    assert e.value.code == 2


def test_table_without_engine():
    table = check_build.rows(None, "ImportError: no _core", env={"OPENMPI_VERSION": "4.1.4"})
    text = check_build.format_table(table)
    assert "engine" in text and "no _core" in text
    assert "OPENMPI_VERSION=4.1.4" in text


def test_table_with_engine():
    info = {
        "horovod_version": "9.9.9",
        "mpi_built": True,
        "mpi_library": "Open MPI v4.1.4, x",
        "nccl_built": 23203,
        "gloo_built": True,
        "cuda_built": False,
        "cpu_operations": "ring",
        "transport": "tcp",
    }
    lines = check_build.format_table(check_build.rows(info, None, env={})).splitlines()
    assert lines[0].split()[1] == "9.9.9"
    assert any(
        line.startswith("MPI") and "[X]" in line and "Open MPI v4.1.4" in line for line in lines
    )
    assert any(line.startswith("NCCL") and "[X]" in line and "2.32.3" in line for line in lines)
    assert any(line.startswith("Gloo") and "[X]" in line and "TCP" in line for line in lines)
    assert any(line.startswith("Transport") and "tcp" in line for line in lines)
    assert not any("WARNING" in line or "NCCL defect" in line for line in lines)


def test_table_names_spark_and_ray_and_their_image_pins():
    """build/venv has pyspark and ray (install-prereqs.sh): the rows say their versions; the
    spark and ray images' ENV pins are echoed."""
    import importlib.metadata

    env = {"PYSPARK_VERSION": "4.3.0", "RAY_VERSION": "2.60.0"}
    lines = check_build.format_table(check_build.rows(None, "no _core", env=env)).splitlines()
    for name, package in (("Spark", "pyspark"), ("Ray", "ray")):
        row = next(line for line in lines if line.split("  ")[0] == name)
        assert f"{package} {importlib.metadata.version(package)} installed" in row, row
    assert "PYSPARK_VERSION=4.3.0 RAY_VERSION=2.60.0" in lines[-1]


def test_table_warns_when_the_loaded_nccl_has_known_defects():
    """build_info()["nccl_defects"] (csrc/common/nccl_defects.cc) for a fake NCCL 2.27.5: the NCCL
    row warns and each defect gets a row of its own (tests/gpu/test_build.py checks the engine's
    side with a preloaded fake version)."""
    note = "NCCL 2.27.5 (2.19.1 <= version < 2.29.7): one-rank ... NVIDIA/nccl#1950 ..."
    info = {
        "horovod_version": "9.9.9",
        "mpi_built": True,
        "nccl_built": 22705,
        "nccl_defects": [note],
        "gloo_built": False,
        "cuda_built": True,
        "cuda_runtime_version": 12090,
    }
    lines = check_build.format_table(check_build.rows(info, None, env={})).splitlines()
    nccl = [line for line in lines if line.startswith("NCCL ")]
    assert len(nccl) == 1 and "2.27.5" in nccl[0] and "WARNING: 1 known defect" in nccl[0]
    assert any(line.lstrip().startswith("NCCL defect") and note in line for line in lines)


needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")


@needs_mpirun
def test_exit_code_is_propagated():
    code = "import os, sys; sys.exit(3 if os.environ['OMPI_COMM_WORLD_RANK'] == '1' else 0)"
    assert launch.main(["-np", "2", sys.executable, "-c", code]) == 3


@needs_mpirun
def test_ranks_run(tmp_path):
    out = tmp_path / "rank"
    code = f"import os; open('{out}' + os.environ['OMPI_COMM_WORLD_RANK'], 'w').close()"
    assert launch.main(["-np", "2", sys.executable, "-c", code]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0", "rank1"]


def test_missing_mpirun(capsys):
    assert launch.main(["--mpirun", "/nonexistent/mpirun", "-np", "1", "true"]) == 127
    assert "not found" in capsys.readouterr().err
