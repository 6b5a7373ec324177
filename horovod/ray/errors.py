"""What horovod.ray's RayExecutor raises besides ValueError for bad arguments."""


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
