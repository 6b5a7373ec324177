"""What horovod.ray's RayExecutor raises besides ValueError for bad arguments, and
worker_error(), the WorkerFailedError of a rank's failure record (static and elastic)."""


class RayExecutorStateError(RuntimeError):
    """A call the executor cannot take in its state: run/execute before start() or after
    shutdown(), or start() twice."""


class PlacementTimeoutError(TimeoutError):
    """The cluster could not place the workers' placement group within
    placement_group_timeout_s. The message names the resources asked for and those the
    cluster has free; nothing is left reserved."""

    def __init__(self, message, requested, available):
        super().__init__(message)
        self.requested = requested  # the bundles asked for: [{"CPU": 1.0}, ...]
        self.available = available  # ray.available_resources() at the timeout


class WorkerFailedError(RuntimeError):
    """`fn` failed on a worker (it raised, or its actor died). The message names the rank, its
    Ray node and host, and carries the worker's traceback; `__cause__` is the worker's own
    exception when Ray could rebuild it on the driver."""

    def __init__(self, message, rank, node_id, host, exc_type=None, remote_traceback=None):
        super().__init__(message)
        self.rank = rank
        self.node_id = node_id
        self.host = host
        self.exc_type = exc_type  # "module.QualName" of the worker's exception, if it raised
        self.remote_traceback = remote_traceback


class ElasticJobError(RuntimeError):
    """The elastic executor ended the job without a result: see the subclasses. The message
    says why, with the generation, the nodes it had and those blacklisted."""


class TooFewWorkersError(ElasticJobError, TimeoutError):
    """Fewer than min_workers workers could be placed for elastic_timeout seconds."""


class ResetLimitError(ElasticJobError):
    """The job re-formed more than reset_limit times."""


def worker_error(record, slot, size, what, stopped):
    """WorkerFailedError for one rank's failure record (see worker.call), or for Ray's error
    when the call gave none (the actor died)."""
    where = (
        f"rank {slot.rank} of {size} (node {slot.label}, host {slot.host}, Ray node id "
        f"{slot.node_id})"
    )
    also = f"; rank(s) {stopped} were stopped" if stopped else ""
    if "ray_error" in record:
        error = record["ray_error"]
        text = (
            f"horovod.ray: {what}: {where} gave no result: {_actor_fate(slot.node_id)}; "
            f"{type(error).__name__}: {error}{also}"
        )
        failure = WorkerFailedError(text, slot.rank, slot.node_id, slot.host)
        failure.__cause__ = error
        return failure
    text = (
        f"horovod.ray: {what}: {where} raised {record['type']}: {record['text']}{also}\n\n"
        f"Traceback on rank {slot.rank}:\n{record['traceback'].rstrip()}"
    )
    failure = WorkerFailedError(
        text, slot.rank, slot.node_id, slot.host, record["type"], record["traceback"]
    )
    failure.__cause__ = record["exception"]
    return failure


def _actor_fate(node_id):
    """Why a rank's actor gave no result, in words: its Ray node gone, or the actor itself."""
    from horovod.ray.discovery import live_node_ids

    try:
        gone = node_id not in live_node_ids()
    except Exception:  # noqa: BLE001  (Ray itself unreachable: say what is known)
        return "its actor died"
    return "its Ray node is gone" if gone else "its actor died (killed, or its process ended)"
