"""What horovod.spark.run raises besides ValueError for bad arguments."""


class SparkSetupError(RuntimeError):
    """The job could not start: no classic SparkContext, fewer task slots than ranks, or a
    function that cannot be pickled. Nothing was launched."""


class RankFailedError(RuntimeError):
    """A rank failed: `fn` raised there, or its process ended without a result. The message
    names the rank and its host and carries the rank's traceback; `__cause__` is the rank's
    own exception when it could be rebuilt on the driver (as upstream, a RuntimeError)."""

    def __init__(self, message, rank, host, exc_type=None, remote_traceback=None, exit_code=None):
        super().__init__(message)
        self.rank = rank
        self.host = host
        self.exc_type = exc_type  # "module.QualName" of the rank's exception, if it raised
        self.remote_traceback = remote_traceback
        self.exit_code = exit_code


class ElasticJobError(RuntimeError):
    """horovod.spark.run_elastic ended without a result: fewer task slots than min_num_proc for
    elastic_timeout seconds, or more resets than reset_limit. The message says which."""
