"""spark: horovod:<tag>-spark, horovod plus pyspark and Debian's Java 17: the pins three ways
(label, ENV, what the software says), the image run as the others are, and horovod.spark.run with
2 ranks in a Spark local[2] session inside the image (the real thing, about 20 s)."""

import json

import pytest

pytestmark = pytest.mark.layer("spark")

# A Spark local[2] session in the image runs horovod.spark.run with 2 ranks: each rank's view of
# the job and an allreduce across them. `timeout`: a hang fails the check instead of the session.
SPARK_RUN = """
import json
from pyspark.sql import SparkSession
import horovod.spark

def fn():
    import os
    import numpy as np
    import horovod.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.full(3, hvd.rank() + 1.0), op=hvd.Sum, name="sum")
    return [hvd.rank(), hvd.size(), hvd.local_rank(), total.tolist(), os.getuid()]

spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
try:
    print("RESULT", json.dumps(horovod.spark.run(fn, num_proc=2, start_timeout=120)))
finally:
    spark.stop()
"""


def test_pyspark_and_java_are_the_pins(host, inspect, pins, run_ok):
    env, labels = inspect["Env"], inspect["Labels"]
    spark = pins["PYSPARK_VERSION"]
    assert env["PYSPARK_VERSION"] == labels["io.horovod.spark.version"] == spark
    assert run_ok(host, "python -c 'import pyspark; print(pyspark.__version__)'") == spark
    jre = pins["OPENJDK_JRE_DEB_VERSION"]
    assert labels["io.horovod.openjdk.deb_version"] == jre
    assert run_ok(host, "dpkg-query -W -f '${Version}' openjdk-17-jre-headless") == jre
    # `java -version` names the same build: 17.0.21.1+2-1~deb12u1 is "17.0.21.1+2-1-deb12u1".
    out = run_ok(host, "java -version 2>&1")
    assert 'openjdk version "17.' in out and jre.replace("~", "-") in out, out


def test_java_home_and_spark_home_are_what_spark_needs(host, inspect, run_ok):
    env = inspect["Env"]
    java = run_ok(host, f"{env['JAVA_HOME']}/bin/java -version 2>&1")
    assert 'openjdk version "17.' in java, java
    package = run_ok(
        host, "python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'"
    )
    assert env["SPARK_HOME"] == package
    for path in ("bin/spark-class", "bin/spark-submit", "jars"):
        assert host.file(f"{package}/{path}").exists, path
    # py4j is the one pyspark requires (pip check), and pyspark's bin is on PATH.
    run_ok(host, "pip-check")
    assert run_ok(host, "command -v spark-submit") == "/opt/venv/bin/spark-submit"


def test_runs_as_the_other_images(inspect, run_ok, user_host):
    """tini and the mpi layer's entrypoint, root by default with mpiuser beside it."""
    assert inspect["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/local/bin/docker-entrypoint.sh"]
    assert not inspect.get("User")
    assert inspect["WorkingDir"] == "/home/mpiuser"
    assert run_ok(user_host, "id -un") == "mpiuser"


def test_labels_and_latest_tag(inspect, client, ref, pins, latest_ref):
    """The horovod layer's release labels kept (title, version, revision), its own on top."""
    labels = inspect["Labels"]
    assert labels["org.opencontainers.image.title"] == "horovod"
    assert labels["org.opencontainers.image.version"] == pins["HOROVOD_VERSION"]
    assert labels["org.opencontainers.image.base.name"] == ref.removesuffix("-spark")
    assert pins["PYSPARK_VERSION"] in labels["org.opencontainers.image.description"]
    assert all(k.startswith(("org.opencontainers.image.", "io.horovod.")) for k in labels), labels
    assert latest_ref == "horovod:latest-spark"
    assert client.images.get(latest_ref).id == client.images.get(ref).id


def test_horovod_spark_run_in_a_local_session_as_mpiuser(user_host, run_ok):
    """The real thing: a Spark session (a JVM) in the image, two barrier tasks, two ranks over
    the TCP transport; as mpiuser, as a user who runs the image without root would."""
    out = run_ok(user_host, f"timeout 240 python -c '{SPARK_RUN}' 2>&1")
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    assert line, out
    got = json.loads(line[len("RESULT ") :])
    assert got == [[0, 2, 0, [3.0, 3.0, 3.0], 1000], [1, 2, 1, [3.0, 3.0, 3.0], 1000]], out


def test_check_build_names_pyspark(host, pins, run_ok):
    """`horovodrun --check-build` says the Spark it has and echoes the image's pin."""
    out = run_ok(host, "horovodrun --check-build")
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert f"pyspark {pins['PYSPARK_VERSION']} installed" in rows["Spark"], out
    assert f"PYSPARK_VERSION={pins['PYSPARK_VERSION']}" in rows["image pins"], out
