"""Upstream's `horovod.runner.elastic` package, for the names user code imports from it
(`discovery.HostDiscovery`). This project's elastic driver is horovod/runner/elastic_driver.py."""
