"""Upstream's `horovod.ray.ray_logger.log(info)`: a worker of an elastic run sends `info` (a
JSON-serializable dict) to the driver, which passes it to each of run()'s callbacks. Outside an
elastic run (the static executor ignores callbacks, as upstream) it does nothing."""

import os


def log(info):
    if not os.environ.get("HOROVOD_ELASTIC_DRIVER"):
        return
    from horovod.common import elastic_worker

    elastic_worker._driver_request("/log", {"log": info})
