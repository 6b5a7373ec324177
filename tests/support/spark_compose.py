"""Spark standalone clusters on compose (compose/compose.spark.yaml with
tests/cluster/compose.spark-test.yaml on top) for tests/cluster/test_spark.py: the patterns and
bounded commands of tests/support/compose.py's Cluster, with the driver container in the
launcher's place. Its owner takes it down with down()."""

import os
import uuid

from tests.support.compose import CLUSTER_DIR, TAG, Cluster, bring_up
from tests.support.paths import ROOT


class SparkCluster(Cluster):
    def __init__(self, workers=2, cores=2):
        self.workers, self.slots = workers, cores
        self.files = [
            ROOT / "compose" / "compose.spark.yaml",
            CLUSTER_DIR / "compose.spark-test.yaml",
        ]
        self.project = f"hvdsparktest{uuid.uuid4().hex[:8]}"
        self.network = f"{self.project}_spark"
        self.launcher = f"{self.project}-driver-1"  # run()/start() run in the driver
        self.env = dict(
            os.environ,
            HOROVOD_IMAGE_TAG=TAG,
            HOROVOD_SPARK_WORKERS=str(workers),
            HOROVOD_SPARK_CORES=str(cores),
            HOROVOD_SPARK_UI_PORT="",  # the UI on a free port of 127.0.0.1
            HOROVOD_TEST_JOBS=str(CLUSTER_DIR / "jobs"),
        )

    def worker(self, i):
        return f"{self.project}-spark-worker-{i}"

    def up(self):
        return self.up_service("spark-worker")


def make_spark_cluster(workers=2, cores=2):
    return bring_up(SparkCluster(workers, cores))
