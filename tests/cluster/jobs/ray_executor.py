"""Drivers of horovod.ray.RayExecutor for tests/cluster/test_ray.py, run on the Ray head of a
compose Ray cluster (`python /jobs/ray_executor.py SCENARIO`). Each prints its findings as one
`RESULT {json}` line; the functions the ranks run are defined here and reach the actors by value
(this file is __main__).

  views     4 workers: start() and a trivial run() timed, each rank's view and an allreduce,
            then fn raising on rank 2 (the error caught and reported), then shutdown()
  raise     fn raising on rank 1, uncaught: the driver ends with the error, no shutdown()
  kill      4 workers; prints READY with each rank's host, then a run of allreduces that
            lasts --seconds; reports the error (and when it came) if the run fails
"""

import argparse
import json
import os
import socket
import time

import ray

from horovod.ray import RayExecutor, WorkerFailedError


def view():
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    total = hvd.allreduce(np.full(3, hvd.rank() + 1.0), op=hvd.Sum, name="cluster.view")
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(),
        "host": socket.gethostname(),
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
        "sum": total.tolist(),
    }


def trivial():
    return 1


def raise_on(bad_rank):
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    if hvd.rank() == bad_rank:
        fail_on_purpose(bad_rank)
    hvd.allreduce(np.ones(4), op=hvd.Sum, name="cluster.never")
    return "finished"


def fail_on_purpose(rank):
    raise ValueError(f"fn failed on purpose on rank {rank}")


def allreduce_for(seconds):
    import numpy as np

    import horovod.numpy as hvd

    hvd.init()
    x = np.ones(1 << 18, np.float32)
    end = time.monotonic() + seconds
    steps = 0
    while time.monotonic() < end:
        hvd.allreduce(x, op=hvd.Sum, name="cluster.steps")
        steps += 1
    return steps


def failure(e):
    return {
        "type": type(e).__name__,
        "message": str(e),
        "rank": getattr(e, "rank", None),
        "host": getattr(e, "host", None),
        "node_id": getattr(e, "node_id", None),
        "remote_traceback": getattr(e, "remote_traceback", None),
        "at": time.time(),
    }


def executor(workers):
    return RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=workers)


def scenario_views(args):
    ex = executor(4)
    began = time.perf_counter()
    ex.start()
    start_s = time.perf_counter() - began
    try:
        views = ex.run(view)
        began = time.perf_counter()
        ex.run(trivial)
        trivial_s = time.perf_counter() - began
        try:
            ex.run(raise_on, args=[2])
            error = None
        except WorkerFailedError as e:
            error = failure(e)
    finally:
        ex.shutdown()
    return {"start_s": start_s, "trivial_s": trivial_s, "views": views, "error": error}


def scenario_raise(args):
    ex = executor(2)
    ex.start()
    ex.run(raise_on, args=[1])  # raises: the driver ends with it, shutdown() never called


def scenario_kill(args):
    ex = executor(4)
    ex.start()
    hosts = [v["host"] for v in ex.run(view)]
    print("READY " + json.dumps(hosts), flush=True)
    try:
        steps = ex.run(allreduce_for, args=[args.seconds])
        return {"steps": steps, "error": None}
    except Exception as e:
        return {"error": failure(e)}
    finally:
        ex.shutdown()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=["views", "raise", "kill"])
    p.add_argument("--seconds", type=float, default=90)
    args = p.parse_args()
    ray.init(address="auto", log_to_driver=False)
    result = globals()[f"scenario_{args.scenario}"](args)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
