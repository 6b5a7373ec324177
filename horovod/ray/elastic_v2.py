"""Upstream's module of the elastic Ray executor: its discovery class is here under its
upstream name (horovod/ray/discovery.py); the executor is RayExecutor(min_workers=...)."""

from horovod.ray.discovery import RayHostDiscovery  # noqa: F401
from horovod.ray.elastic import ElasticExecutor  # noqa: F401
