"""Broadcasts and gathers of variables and Python objects, built on the ops; graph mode's
broadcast_global_variables and BroadcastGlobalVariablesHook."""

import tensorflow as tf

from horovod.common import basics as _b
from horovod.common import objects as _objects
from horovod.tensorflow import mpi_ops
from horovod.tensorflow.mpi_ops import _process_set_id


def broadcast_variables(variables, root_rank=0, inplace=False, process_set=None):
    """Assigns root_rank's values to `variables` on every rank, in one grouped op (one
    negotiation; ranks must agree on the number of variables). Returns the assign ops' group in
    graph mode, None eagerly."""
    pid = _process_set_id(process_set)
    variables = list(variables)
    if not variables:
        return tf.no_op() if not tf.executing_eagerly() else None
    # Eagerly a stable name, so that repeated calls take the cache's fast path.
    name = "broadcast_variables" if tf.executing_eagerly() else None
    values = mpi_ops._broadcast(
        [tf.convert_to_tensor(v) for v in variables],
        root_rank,
        name=name,
        grouped=True,
        process_set_id=pid,
    )
    assigns = [v.assign(value) for v, value in zip(variables, values)]
    return None if tf.executing_eagerly() else tf.group(*assigns)


def _in_object_context(fn, session):
    """Runs fn(fetch) where `fetch` turns an op's output into a NumPy array: eagerly, its
    value; in tf.compat.v1 graph mode, through `session` or the default session, as upstream
    (the object ops return Python objects there too). Inside a tf.function, objects exist only
    while the function is traced: the exchange runs then, eagerly (tf.init_scope), and its
    result is what the trace sees; every rank must trace the function alike (they do when they
    call it with the same input signatures)."""
    if tf.executing_eagerly():
        return fn(lambda t: t.numpy())
    if tf.inside_function():
        with tf.init_scope():
            return _in_object_context(fn, session)
    sess = session or tf.compat.v1.get_default_session()
    if sess is None:
        raise RuntimeError(
            "the object collectives need a session in graph mode: pass session=, or call them "
            "inside `with session.as_default():`"
        )
    return fn(sess.run)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=None):
    """Returns root_rank's `obj` (anything picklable) on every rank: its size is broadcast,
    then its bytes (horovod/common/objects.py). Eagerly, in tf.compat.v1 graph mode (run with
    `session` or the default session) and inside a tf.function (exchanged when the function is
    traced: see _in_object_context). The ops are named after `name`, never after the object
    (the other ranks' may be None); unnamed calls are numbered per process, so every rank must
    make them in the same order."""
    pid = _process_set_id(process_set)

    def exchange(fetch):
        def move(data, op_name):
            out = mpi_ops._broadcast(
                [tf.constant(data)], root_rank, name=op_name, process_set_id=pid
            )[0]
            return fetch(out)

        return _objects.broadcast_object(obj, _b.rank() == root_rank, move, name, pid, root_rank)

    return _in_object_context(exchange, session)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=None):
    """A function broadcasting its argument from root_rank (upstream's signature)."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=None):
    """Every rank's `obj` (each rank's may differ, in type too), as a list indexed by rank (of
    the process set). Where it runs and how its ops are named: as broadcast_object."""
    pid = _process_set_id(process_set)

    def exchange(fetch):
        def move(data, op_name):
            return fetch(
                mpi_ops._allgather([tf.constant(data)], name=op_name, process_set_id=pid)[0]
            )

        return _objects.allgather_object(obj, move, name, pid)

    return _in_object_context(exchange, session)


def broadcast_global_variables(root_rank):
    """Graph mode (tf.compat.v1) only: an op assigning root_rank's values to every global
    variable. Eagerly, use broadcast_variables(model.variables) instead."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "broadcast_global_variables() needs graph mode (tf.compat.v1); "
            "eagerly, call hvd.broadcast_variables(variables, root_rank)"
        )
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts root_rank's global variables once the session exists (MonitoredTrainingSession),
    so every rank starts from the same weights."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None

    def begin(self):
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
