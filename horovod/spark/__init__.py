"""Horovod on Spark: `horovod.spark.run(fn, ...)` runs `fn` on `num_proc` ranks, one per Spark
task of a single barrier stage (gang-scheduled), and returns its results in rank order;
`horovod.spark.run_elastic(fn, ...)` runs an `hvd.elastic.run` function as generations of such
stages, going on from the last commit when executors are lost or added.

The ranks form the job over the engine's TCP transport (upstream's Gloo variables, as
`horovodrun --gloo` gives them): no ssh, no mpirun. The driver serves the rendezvous and relays
every rank's output; each task runs `fn` in a child process of its Python worker. docs/spark.md
says what is there and what is not (the estimators are not).
"""

from horovod.spark.elastic import run_elastic
from horovod.spark.errors import ElasticJobError, RankFailedError, SparkSetupError
from horovod.spark.runner import run

__all__ = ["run", "run_elastic", "ElasticJobError", "RankFailedError", "SparkSetupError"]
