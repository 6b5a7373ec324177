"""horovod.spark's tests run real Spark: a local-cluster of 2 workers with 2 cores each (4 task
slots; executors are JVM processes of their own, so ranks really run in Spark's Python workers),
one SparkSession per test module. Needs Java 17 and pyspark (scripts/install-prereqs.sh); the
module is skipped, saying so, where either is missing."""

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

WORKERS, CORES = 2, 2
SLOTS = WORKERS * CORES
# Starting the cluster's JVMs takes 10-20 s on an idle machine, minutes on a loaded one.
SESSION_START_SECONDS = 600


def spark_home(root):
    """A SPARK_HOME of links to pip's pyspark (jars, bin): local-cluster's workers launch the
    executors from it and write their work directories (logs) under it, here in a temp dir
    rather than inside the venv."""
    import pyspark

    package = Path(pyspark.__file__).parent
    root.mkdir(parents=True, exist_ok=True)
    for name in ("jars", "bin"):
        (root / name).symlink_to(package / name)
    return root


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    yield from local_cluster(tmp_path_factory, {})


# Fake GPUs (there are none here; Spark hands out the addresses the discovery script lists):
# each worker discovers two, the first worker "0","1", the second "2","3" (as one 4-GPU host),
# each executor takes its worker's two, each task one.
GPU_DISCOVERY = """#!/bin/sh
if mkdir "$(dirname "$0")/first-worker" 2>/dev/null; then
  echo '{"name": "gpu", "addresses": ["0", "1"]}'
else
  echo '{"name": "gpu", "addresses": ["2", "3"]}'
fi
"""


@pytest.fixture(scope="module")
def spark_with_gpus(tmp_path_factory):
    """The local cluster with Spark's GPU scheduling over fake addresses (GPU_DISCOVERY)."""
    script = tmp_path_factory.mktemp("gpus") / "discover.sh"
    script.write_text(GPU_DISCOVERY)
    script.chmod(0o755)
    conf = {
        "spark.worker.resource.gpu.amount": "2",
        "spark.worker.resource.gpu.discoveryScript": str(script),
        "spark.executor.resource.gpu.amount": "2",
        "spark.task.resource.gpu.amount": "1",
    }
    yield from local_cluster(tmp_path_factory, conf)


def local_cluster(tmp_path_factory, conf):
    """A SparkSession on local-cluster[WORKERS,CORES,1024] with `conf` added, once SLOTS task
    slots are up; stopped afterwards."""
    pytest.importorskip("pyspark", reason="horovod.spark's tests need pyspark")
    if shutil.which("java") is None:
        pytest.skip("horovod.spark's tests need Java 17 (openjdk-17-jre-headless)")
    from pyspark.sql import SparkSession

    home = spark_home(tmp_path_factory.mktemp("spark") / "home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_HOME", str(home))
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the tests stay on loopback
        # The executors import horovod from the tree, as the test process does.
        root = str(Path(__file__).resolve().parents[2])
        env.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        )
        builder = (
            SparkSession.builder.master(f"local-cluster[{WORKERS},{CORES},1024]")
            .appName("horovod-spark-tests")
            .config("spark.executor.memory", "512m")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        try:
            session.sparkContext.setLogLevel("ERROR")
            wait_for_slots(session.sparkContext, SLOTS, SESSION_START_SECONDS)
            yield session
        finally:
            session.stop()


def wait_for_slots(sc, want, timeout):
    from horovod.spark.runner import task_slots

    deadline = time.monotonic() + timeout
    while task_slots(sc) < want:
        if time.monotonic() > deadline:
            pytest.fail(
                f"the local cluster has {task_slots(sc)} of {want} task slots after {timeout} s"
            )
        time.sleep(0.5)
