"""Upstream's `horovod.runner.common` path, for the helpers its tests and users import."""
