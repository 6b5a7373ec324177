"""Horovod on Spark: `horovod.spark.run(fn, ...)` runs `fn` on `num_proc` ranks, one per Spark
task of a single barrier stage (gang-scheduled), and returns its results in rank order.

The ranks form the job over the engine's TCP transport (upstream's Gloo variables, as
`horovodrun --gloo` gives them): no ssh, no mpirun. The driver serves the rendezvous and relays
every rank's output; each task runs `fn` in a child process of its Python worker. docs/spark.md
says what is there and what is not (run_elastic and the estimators are not).
"""

from horovod.spark.errors import RankFailedError, SparkSetupError
from horovod.spark.runner import run

__all__ = ["run", "RankFailedError", "SparkSetupError"]
