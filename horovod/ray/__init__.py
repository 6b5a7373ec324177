"""Horovod on Ray: `horovod.ray.RayExecutor` runs a static Horovod job in Ray actors, one rank
per actor, placed by a placement group; `run(fn)` returns fn's results in rank order.

The ranks form the job over the engine's TCP transport (upstream's Gloo variables, as
`horovodrun --gloo` gives them); the driver serves the rendezvous. docs/ray.md says what is
there and what is not (the elastic executor is not).
"""

from horovod.ray.errors import PlacementTimeoutError, RayExecutorStateError, WorkerFailedError
from horovod.ray.runner import RayExecutor, RaySettings
from horovod.ray.worker import BaseHorovodWorker

__all__ = [
    "RayExecutor",
    "RaySettings",
    "BaseHorovodWorker",
    "PlacementTimeoutError",
    "RayExecutorStateError",
    "WorkerFailedError",
]
