"""The collectives on TensorFlow tensors (hvd.allreduce, grouped_allreduce, allgather,
grouped_allgather, broadcast, broadcast_, alltoall, reducescatter, grouped_reducescatter):
argument handling and compression around the ops of mpi_ops. horovod.tensorflow re-exports
them; the Keras helpers and gradient reduction call them from here, so neither needs the
package's __init__. Named for what they take, tf.Tensor and tf.IndexedSlices, as
horovod/common/array_ops.py is for arrays; mpi_ops.py is the compiled ops underneath.
"""

import tensorflow as tf

from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import (
    Adasum,
    Average,
    Sum,
    _process_set_id,
    _set_rank_and_size,
)

ADASUM_SPARSE = (
    "Adasum does not reduce tf.IndexedSlices (as upstream); pass sparse_as_dense=True to "
    "DistributedGradientTape/DistributedOptimizer, or densify with tf.convert_to_tensor"
)

# AutoGraph would convert these wrappers' Python on every trace (10-20 ms per op, measured):
# they hold no tensor-dependent control flow, so tf.function may call them as they are.
_no_autograph = tf.autograph.experimental.do_not_convert


def _op(average, op):
    """Upstream's deprecated `average=` flag, resolved against `op` (default Average)."""
    if average is not None:
        if op is not None:
            raise ValueError("pass either op= or the deprecated average=, not both")
        return Average if average else Sum
    return Average if op is None else op


def _check_slices_args(op, prescale_factor, postscale_factor):
    """Raised alike on every rank (the same arguments), before any op is submitted."""
    if op == Adasum:
        raise NotImplementedError(ADASUM_SPARSE)
    if op not in (Average, Sum):
        raise NotImplementedError(
            "tf.IndexedSlices can be reduced with Sum or Average only (or densify them: "
            "sparse_as_dense=True)"
        )
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("scale factors are not supported for tf.IndexedSlices")


def _allreduce_slices(slices, op, name, prescale_factor, postscale_factor, process_set_id):
    """tf.IndexedSlices reduced as upstream does: their values and their indices gathered from
    every rank (one grouped allgather each, named `name`.values and `name`.indices); Average
    then divides the values by the number of ranks. Only Sum and Average, without scale
    factors, as upstream."""
    _check_slices_args(op, prescale_factor, postscale_factor)
    values = _ops._allgather(
        [s.values for s in slices],
        None if name is None else name + ".values",
        grouped=True,
        process_set_id=process_set_id,
    )
    indices = _ops._allgather(
        [s.indices for s in slices],
        None if name is None else name + ".indices",
        grouped=True,
        process_set_id=process_set_id,
    )
    if op == Average:
        size = _set_rank_and_size(process_set_id)[1]
        values = [v / tf.cast(size, v.dtype) for v in values]
    return [
        tf.IndexedSlices(v, i, dense_shape=s.dense_shape)
        for v, i, s in zip(values, indices, slices)
    ]


@_no_autograph
def allreduce(
    tensor,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
    process_set=None,
    ignore_name_scope=False,
):
    """Reduces `tensor` across ranks (Average by default). A tf.IndexedSlices is reduced by
    gathering its values and indices (Sum or Average, no scale factors), as upstream does.
    op=Adasum returns the Adasum combination as it is (no division by the number of ranks):
    floating dtypes on the CPU, a power-of-two number of ranks, else an error on every rank."""
    pid = _process_set_id(process_set)
    op = _op(average, op)
    if isinstance(tensor, tf.IndexedSlices):
        return _allreduce_slices([tensor], op, name, prescale_factor, postscale_factor, pid)[0]
    if not isinstance(tensor, tf.Tensor):
        tensor = tf.convert_to_tensor(tensor)
    if compression is Compression.none:  # the common case, kept short (eager latency)
        return _ops._allreduce(
            [tensor], op, name, prescale_factor, postscale_factor, process_set_id=pid
        )[0]
    compressed, ctx = compression.compress(tensor)
    reduced = _ops._allreduce(
        [compressed], op, name, prescale_factor, postscale_factor, process_set_id=pid
    )[0]
    return compression.decompress(reduced, ctx)


@_no_autograph
def grouped_allreduce(
    tensors,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
    process_set=None,
    ignore_name_scope=False,
):
    """Reduces a list of tensors submitted together: one op, one negotiation, fused by dtype.
    Ranks must pass the same number of tensors: otherwise the op fails on every rank, naming
    each rank's count. Returns the results in the input order. tf.IndexedSlices members (Sum or
    Average, no scale factors) are gathered, as allreduce gathers one, in one grouped allgather
    of their values and one of their indices, after the dense members' op."""
    pid = _process_set_id(process_set)
    op = _op(average, op)
    tensors = [t if isinstance(t, tf.IndexedSlices) else tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    if any(isinstance(t, tf.IndexedSlices) for t in tensors):
        _check_slices_args(op, prescale_factor, postscale_factor)
    return _reduce_members(tensors, op, name, prescale_factor, postscale_factor, compression, pid)


def _reduce_members(tensors, op, name, prescale, postscale, compression, pid, sparse_op=None):
    """One group's reduction, for grouped_allreduce and reduce_gradients: the dense members in
    one grouped allreduce (compressed), then the tf.IndexedSlices members gathered with
    `sparse_op` (default `op`; no scale factors). Dense first: ranks that disagree on which
    members are sparse then fail on the dense op's group size (named on every rank) instead of
    waiting in the gathers. Returns the results in the input order."""
    out = list(tensors)
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    if dense:
        compressed = [compression.compress(tensors[i]) for i in dense]
        reduced = _ops._allreduce(
            [c for c, _ in compressed],
            op,
            name,
            prescale,
            postscale,
            grouped=True,
            process_set_id=pid,
        )
        for i, r, (_, ctx) in zip(dense, reduced, compressed):
            out[i] = compression.decompress(r, ctx)
    if sparse:
        gathered = _allreduce_slices(
            [tensors[i] for i in sparse], sparse_op or op, name, 1.0, 1.0, pid
        )
        for i, g in zip(sparse, gathered):
            out[i] = g
    return out


@_no_autograph
def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Concatenates every rank's tensor along the first dimension, which may differ."""
    pid = _process_set_id(process_set)
    return _ops._allgather([tf.convert_to_tensor(tensor)], name, process_set_id=pid)[0]


@_no_autograph
def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=None):
    """Allgathers a list of tensors submitted together (one op; ranks must agree on the count)."""
    pid = _process_set_id(process_set)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    return list(_ops._allgather(tensors, name, grouped=True, process_set_id=pid))


@_no_autograph
def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """Returns root_rank's tensor on every rank. root_rank is a global rank (hvd.rank()), also
    with a process set, as upstream."""
    pid = _process_set_id(process_set)
    return _ops._broadcast([tf.convert_to_tensor(tensor)], root_rank, name, process_set_id=pid)[0]


@_no_autograph
def broadcast_(variables, root_rank, name=None, process_set=None):
    """Assigns root_rank's values to `variables` (tf.Variable) on every rank, in one grouped
    op (ranks must agree on the count), and returns their updated values, as upstream's
    in-place broadcast. The assignment is TensorFlow's own: each variable's buffer is written
    once, after the broadcast."""
    pid = _process_set_id(process_set)
    variables = list(variables)
    if not variables:
        return []
    values = _ops._broadcast(
        [tf.convert_to_tensor(v) for v in variables],
        root_rank,
        name,
        grouped=True,
        process_set_id=pid,
    )
    assigns = [v.assign(b, read_value=False) for v, b in zip(variables, values)]
    with tf.control_dependencies([a for a in assigns if a is not None]):
        return [v.read_value() for v in variables]


@_no_autograph
def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=None):
    """Sends splits[r] rows to rank r and returns (rows received, rows received from each
    rank), as upstream. Without `splits`, the first dimension is split evenly and only the rows
    received are returned; a first dimension that the number of ranks does not divide fails
    with tf.errors.InvalidArgumentError on every rank (the kernel checks it when it runs, so
    also for shapes known only then)."""
    pid = _process_set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    if splits is None:
        # Empty splits: the kernel's even split (upstream's convention).
        return _ops._alltoall(tensor, tf.zeros([0], tf.int32), name, process_set_id=pid)[0]
    return _ops._alltoall(tensor, splits, name, process_set_id=pid)


@_no_autograph
def reducescatter(
    tensor,
    op=Average,
    name=None,
    ignore_name_scope=False,
    process_set=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduces across ranks; returns this rank's block of rows (the first ranks get one extra
    row when the first dimension does not divide evenly)."""
    pid = _process_set_id(process_set)
    return _ops._reducescatter(
        [tf.convert_to_tensor(tensor)],
        op,
        name,
        prescale_factor,
        postscale_factor,
        process_set_id=pid,
    )[0]


@_no_autograph
def grouped_reducescatter(
    tensors,
    device_dense="",
    compression=Compression.none,
    op=Average,
    process_set=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
):
    """Reducescatters a list of tensors submitted together: one op, one negotiation; ranks
    must pass the same number of tensors, or it fails on every rank naming each rank's count.
    Returns this rank's block of rows of each, in the input order. Upstream's signature, plus
    `name` (last), which names the group as in grouped_allreduce."""
    pid = _process_set_id(process_set)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    compressed = [compression.compress(t) for t in tensors]
    reduced = _ops._reducescatter(
        [c for c, _ in compressed],
        op,
        name,
        prescale_factor,
        postscale_factor,
        grouped=True,
        process_set_id=pid,
    )
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, compressed)]
