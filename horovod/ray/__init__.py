"""Horovod on Ray: `horovod.ray.RayExecutor` runs a static Horovod job in Ray actors, one rank
per actor, placed by a placement group; `run(fn)` returns fn's results in rank order.

The ranks form the job over the engine's TCP transport (upstream's Gloo variables, as
`horovodrun --gloo` gives them); the driver serves the rendezvous. docs/ray.md says what is
there and what is not. With min_workers (upstream's elastic_v2) the job is elastic: generations
of fresh actors on the nodes Ray can hold (horovod/ray/elastic.py).
"""

from horovod.ray.errors import (
    ElasticJobError,
    PlacementTimeoutError,
    RayExecutorStateError,
    ResetLimitError,
    TooFewWorkersError,
    WorkerFailedError,
)
from horovod.ray.runner import RayExecutor, RaySettings
from horovod.ray.worker import BaseHorovodWorker

__all__ = [
    "RayExecutor",
    "RaySettings",
    "BaseHorovodWorker",
    "PlacementTimeoutError",
    "RayExecutorStateError",
    "WorkerFailedError",
    "ElasticJobError",
    "ResetLimitError",
    "TooFewWorkersError",
]
