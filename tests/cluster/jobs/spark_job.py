"""Driver program of tests/cluster/test_spark.py, run in the Spark cluster's driver container:

    python /jobs/spark_job.py SCENARIO...

One SparkSession (spark://spark-master:7077) runs each scenario in turn, once every task slot of
the cluster is up; each prints one `SCENARIO <name> <json>` line for the test to read:
  placement  4 ranks: each rank's view of the job (host, local and cross ranks) and an allreduce
  raise      4 ranks, rank 2 raises while the others wait in an allreduce: the driver's error
  steps      4 ranks in allreduces for up to 300 s, rank 0 printing `step N` (the test kills a
             worker meanwhile); the driver's error, and the seconds from the first step
The functions are this script's own (pickled by value): the executors need nothing from /jobs.
"""

import json
import os
import sys
import time

from pyspark.sql import SparkSession

import horovod.spark
from horovod.spark.runner import task_slots

RANKS = 4
SLOTS_WAIT_SECONDS = 120


def view():
    import socket

    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    total = hvd.allreduce(np.full(2, hvd.rank() + 1.0), op=hvd.Sum, name="sum")
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(),
        "hostname": socket.gethostname(),
        "horovod_hostname": os.environ["HOROVOD_HOSTNAME"],
        "sum": total.tolist(),
    }


def fail_on_rank_2():
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    if hvd.rank() == 2:
        time.sleep(1)
        raise ValueError("boom on purpose from rank 2")
    hvd.allreduce(np.zeros(1), name="never")  # rank 2 never joins: the driver stops these
    return "not stopped"


def steps(seconds):
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    deadline = time.monotonic() + seconds
    step = 0
    while time.monotonic() < deadline:
        hvd.allreduce(np.ones(1 << 16, np.float32), op=hvd.Sum, name="step")
        step += 1
        if hvd.rank() == 0 and step % 10 == 0:
            print(f"step {step}", flush=True)
        time.sleep(0.02)
    return step


def outcome(fn, *args):
    """{"result": ...} or {"error": type, "text": str(e), "rank":, "host":}, with the seconds."""
    start = time.monotonic()
    try:
        got = {"result": horovod.spark.run(fn, args=args, num_proc=RANKS, start_timeout=120)}
    except Exception as e:
        got = {"error": type(e).__name__, "text": str(e)}
        got.update(rank=getattr(e, "rank", None), host=getattr(e, "host", None))
    got["seconds"] = time.monotonic() - start
    return got


SCENARIOS = {
    "placement": lambda: outcome(view),
    "raise": lambda: outcome(fail_on_rank_2),
    "steps": lambda: outcome(steps, 300),
}


def main(names):
    spark = SparkSession.builder.master(os.environ["SPARK_MASTER_URL"])
    spark = spark.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    deadline = time.monotonic() + SLOTS_WAIT_SECONDS
    while task_slots(sc) < RANKS:
        if time.monotonic() > deadline:
            sys.exit(f"{task_slots(sc)} of {RANKS} task slots after {SLOTS_WAIT_SECONDS} s")
        time.sleep(0.2)
    try:
        for name in names:
            print(f"SCENARIO {name} {json.dumps(SCENARIOS[name]())}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
