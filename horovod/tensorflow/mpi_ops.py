"""The TensorFlow ops: loads mpi_lib.so (compiled against one TensorFlow version), names each
op for negotiation, and registers the gradients.

Naming: ops are matched across ranks by name. In a tf.function (graph) the kernel uses its node
name, "Horovod<Op>_<function>_<k>" for the k-th unnamed op of its kind traced in the graph
(created at the top name scope: see _unnamed_node), unless `name` is given ("name#1" the
second time in one graph); either is stable across steps;
eagerly, an unnamed op gets a per-process counter name, which matches across ranks only if
every rank issues unnamed ops in the same order (as with the NumPy frontend).
"""

import operator
import os
import re
import weakref

import tensorflow as tf

from horovod.common import arguments as _args
from horovod.common import basics as _b
from horovod.common import engine_types as _types
from horovod.common import naming as _naming
from horovod.common import process_sets as _ps

_DIR = os.path.dirname(os.path.abspath(__file__))
_LIB_PATH = os.path.join(_DIR, "mpi_lib.so")
# The TensorFlow version the library was compiled against (written by the build). Read by
# _load_library() at call time, so that a test can point it at a stamp of its own.
_STAMP_PATH = os.path.join(_DIR, "mpi_lib.tf_version")


def _major_minor(version):
    return ".".join(version.split(".")[:2])


def _load_library():
    running = tf.__version__
    if not os.path.exists(_LIB_PATH):
        raise ImportError(
            "horovod.tensorflow was not built: TensorFlow was not importable when horovod was "
            "built. Install TensorFlow, then rebuild horovod (`pip install --force-reinstall "
            "--no-deps .`, or `make build` in a source tree)"
        )
    built = open(_STAMP_PATH).read().strip() if os.path.exists(_STAMP_PATH) else None
    hint = (
        f"rebuild horovod against TensorFlow {_major_minor(running)} (`pip install "
        "--force-reinstall --no-deps .`, or `make build`)"
    )
    if built and _major_minor(built) != _major_minor(running):
        raise ImportError(
            f"horovod.tensorflow was built against TensorFlow {built}, but this "
            f"process runs TensorFlow {running}: {hint}"
        )
    try:
        return tf.load_op_library(_LIB_PATH)
    except tf.errors.NotFoundError as e:
        if "undefined symbol" in str(e):
            raise ImportError(
                f"horovod.tensorflow does not match TensorFlow {running} ({e}): {hint}"
            ) from e
        raise


_lib = _load_library()


def _run_unordered_in_functions():
    """The ops are stateful (registered so in mpi_ops.cc: Grappler must neither fold nor merge
    a collective). tf.function's automatic control dependencies would then chain every one of
    them in program order, so that a step's collectives could no longer overlap: they are
    declared independent instead (TensorFlow's mechanism for side effects that touch no other
    op), which still makes every one of them run. If TensorFlow's internals move, they stay
    chained: slower, never wrong."""
    try:
        from tensorflow.python.framework import auto_control_deps as acd

        acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = frozenset(
            acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS
            | {
                "HorovodAllreduce",
                "HorovodAllgather",
                "HorovodBroadcast",
                "HorovodAlltoall",
                "HorovodReducescatter",
                "HorovodInvalid",
            }
        )
    except (ImportError, AttributeError, TypeError):
        pass


_run_unordered_in_functions()
_b._lib()  # the pybind11 module: init() and topology live there, on the same engine

Sum, Average, Min, Max, Product, Adasum = _b.Sum, _b.Average, _b.Min, _b.Max, _b.Product, _b.Adasum

# The dtypes each op's kernel takes, as the engine declares them (HVD_REDUCE_TYPES and
# HVD_MOVE_TYPES in csrc/tensorflow/mpi_ops.cc register the same; a scenario checks they agree):
# bool is moved, never reduced. _check_dtypes reads them.
_REDUCE_DTYPES = tuple(tf.as_dtype(n) for n in _types.REDUCIBLE_TYPES)
_MOVE_DTYPES = tuple(tf.as_dtype(n) for n in _types.DATA_TYPES)
# kind: (the engine's OpType, the dtypes its kernel takes)
_KINDS = {
    "Allreduce": (_types.ALLREDUCE, _REDUCE_DTYPES),
    "Allgather": (_types.ALLGATHER, _MOVE_DTYPES),
    "Broadcast": (_types.BROADCAST, _MOVE_DTYPES),
    "Alltoall": (_types.ALLTOALL, _MOVE_DTYPES),
    "Reducescatter": (_types.REDUCESCATTER, _REDUCE_DTYPES),
}


def _check_initialized():
    if not _b.is_initialized():
        raise ValueError(_b._NOT_INITIALIZED)


def _normalize_name(name):
    """A tensor name as part of a node name (TF allows [A-Za-z0-9_.\\-/] after the first)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


_name_tensors = {}  # eager: a name's string tensor, built once (building one costs ~15 us)
_graph_names = weakref.WeakKeyDictionary()  # graph -> {name: times given} (see _names)
_MAX_NAME_TENSORS = 1 << 14


def _key_tensor(key):
    if not tf.executing_eagerly():
        return tf.constant(key)
    t = _name_tensors.get(key)
    if t is None:
        if len(_name_tensors) >= _MAX_NAME_TENSORS:
            _name_tensors.clear()
        t = _name_tensors[key] = tf.constant(key)
    return t


_graph_counts = weakref.WeakKeyDictionary()  # graph -> {(kind, set): unnamed ops traced}


def _unnamed_node(kind, process_set_id):
    """The node name of an unnamed op in a graph: "Horovod<kind>_<function>_<k>" for the k-th
    unnamed op of its kind (and process set) traced in the graph of tf.function <function>, at
    the graph's top name scope. Its
    input's name and the enclosing name scopes would not do: they carry process-wide counters
    (Keras layer and optimizer names: "dense_1" on a rank that built one more layer before), so
    ranks would name one op differently and each wait for the others' (a hang). The order of
    tracing is the program's order, the same on every rank. Counted per process set, as eager
    names are: only a set's members trace its ops."""
    graph = tf.compat.v1.get_default_graph()
    counts = _graph_counts.setdefault(graph, {})
    k = counts[kind, process_set_id] = counts.get((kind, process_set_id), -1) + 1
    suffix = f"{k}" if process_set_id == 0 else f"set{process_set_id}_{k}"
    # The tf.function's Python name, for the reader and so that two functions' ops rarely
    # share a name; control flow's graphs end in a process-wide number ("cond_true_42"),
    # dropped.
    where = re.sub(r"_\d+$", "", _normalize_name(getattr(graph, "name", "") or "")).strip("_")
    return f"Horovod{kind}_{where}_{suffix}" if where else f"Horovod{kind}_{suffix}"


def _create(op_fn, *args, **kwargs):
    """Calls a collective's op function; in a graph, at the top name scope, so that the node
    name (the negotiation name of an unnamed op) does not take in the caller's name scopes,
    which differ between ranks when they carry process-wide counters (see _unnamed_node)."""
    if tf.executing_eagerly():
        return op_fn(*args, **kwargs)
    with tf.compat.v1.get_default_graph().name_scope(None):
        return op_fn(*args, **kwargs)


def _names(kind, name, tensor, process_set_id=0):
    """(node name, negotiation-name tensor) of an op: the kernel uses the node name when the
    second is empty, which is the stable choice inside a tf.function. Unnamed eager ops are
    counted per process set: only a set's members advance its counter, so the global set's
    names stay the same on every rank."""
    if tf.executing_eagerly():
        if name is None:  # unique per call: not worth caching
            return None, tf.constant(_naming.unnamed(kind.lower(), process_set_id))
        return None, _key_tensor(name)
    if name is None:
        return _unnamed_node(kind, process_set_id), tf.constant("")
    # Ops given one `name` twice in a graph would both claim it: one refused on each rank, the
    # other paired with the peer's other tensor, depending on which one each rank ran first.
    # The second is "name#1", and so on, in the order they were traced, alike on every rank.
    graph = tf.compat.v1.get_default_graph()
    uses = _graph_names.setdefault(graph, {})
    k = uses[name] = uses.get(name, -1) + 1
    return _normalize_name(name), tf.constant(name if k == 0 else f"{name}#{k}")


def _check_dtypes(kind, tensors):
    """Why `kind`'s kernel cannot take `tensors` (a dtype outside its list: tf.string, complex,
    bool for a reduction, ...), or None. The one dtype check of every op, eager and in
    a graph; the op then goes to _invalid instead of its kernel."""
    supported = _KINDS[kind][1]
    bad = sorted({t.dtype.name for t in tensors if t.dtype not in supported})
    if not bad:
        return None
    return (
        f"hvd.{kind.lower()} does not support dtype {', '.join(bad)} "
        f"(supported: {', '.join(d.name for d in supported)})"
    )


def _invalid(kind, tensors, node, key, reason, grouped=False, process_set_id=0):
    """Submits the op with `reason` as its invalid marker (the HorovodInvalid kernel), under the
    name its kernel would have used: the engine fails it on every rank with the reason, named by
    rank, instead of the other ranks waiting for a rank whose op TensorFlow refused to build.
    Eagerly this raises tf.errors.InvalidArgumentError; in a graph the outputs (the inputs,
    passed through) fail when run."""
    return _create(
        _lib.horovod_invalid,
        tensors,
        key,
        op_type=_KINDS[kind][0],
        reason=reason,
        grouped=grouped,
        process_set_id=process_set_id,
        name=node,
    )


def _process_set_id(process_set):
    """The kernels' process_set_id attr of `process_set` (None: the global set); a set that does
    not exist in the engine (never added, removed) is a ValueError here."""
    return _ps.process_set_id(process_set)


def _set_rank_and_size(process_set_id):
    """(this rank's rank in the set, the set's size), for gradients and even splits."""
    return _ps.rank_and_size(process_set_id)


def _op_reason(op):
    """Why `op` cannot reduce, or None. Whether the op suits the tensors (Adasum: floating
    dtypes in host memory, a power-of-two number of ranks) is the engine's negotiated check."""
    return _args.reason(_args.reduce_op, op)


def _factor_reason(what, value):
    return _args.reason(_args.real_factor, what, value)


def _root_reason(root_rank):
    return _args.reason(_args.root_rank, root_rank)


def _first_reason(*reasons):
    return next((r for r in reasons if r), None)


# An argument a rank cannot use is not raised on that rank alone (the others would wait for its
# op): the op is submitted through _invalid with the reason, and fails on every rank.


def _reduction(
    kind, kernel, tensors, op, name, prescale_factor, postscale_factor, grouped, process_set_id
):
    """Allreduce and reducescatter: the same arguments, checks and attrs."""
    _check_initialized()
    node, key = _names(kind, name, tensors[0], process_set_id)
    if _args.plain_reduction_args(op, prescale_factor, postscale_factor):
        bad = _check_dtypes(kind, tensors)
    else:
        bad = _first_reason(
            _op_reason(op),
            _factor_reason("prescale_factor", prescale_factor),
            _factor_reason("postscale_factor", postscale_factor),
            _check_dtypes(kind, tensors),
        )
    if bad:
        return _invalid(kind, tensors, node, key, bad, grouped, process_set_id)
    return _create(
        kernel,
        tensors,
        key,
        reduce_op=int(op),
        prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor),
        grouped=grouped,
        process_set_id=process_set_id,
        name=node,
    )


@tf.autograph.experimental.do_not_convert
def _allreduce(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    grouped=False,
    process_set_id=0,
):
    """Allreduces a list of tensors in one op (one negotiation, fused by dtype)."""
    return _reduction(
        "Allreduce",
        _lib.horovod_allreduce,
        tensors,
        op,
        name,
        prescale_factor,
        postscale_factor,
        grouped,
        process_set_id,
    )


@tf.autograph.experimental.do_not_convert
def _allgather(tensors, name=None, grouped=False, process_set_id=0):
    _check_initialized()
    node, key = _names("Allgather", name, tensors[0], process_set_id)
    bad = _check_dtypes("Allgather", tensors)
    if bad:
        return _invalid("Allgather", tensors, node, key, bad, grouped, process_set_id)
    return _create(
        _lib.horovod_allgather,
        tensors,
        key,
        grouped=grouped,
        process_set_id=process_set_id,
        name=node,
    )


@tf.autograph.experimental.do_not_convert
def _broadcast(tensors, root_rank, name=None, grouped=False, process_set_id=0):
    _check_initialized()
    node, key = _names("Broadcast", name, tensors[0], process_set_id)
    bad = _first_reason(_root_reason(root_rank), _check_dtypes("Broadcast", tensors))
    if bad:
        return _invalid("Broadcast", tensors, node, key, bad, grouped, process_set_id)
    return _create(
        _lib.horovod_broadcast,
        tensors,
        key,
        root_rank=operator.index(root_rank),
        grouped=grouped,
        process_set_id=process_set_id,
        name=node,
    )


@tf.autograph.experimental.do_not_convert
def _reducescatter(
    tensors,
    op=Average,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    grouped=False,
    process_set_id=0,
):
    return _reduction(
        "Reducescatter",
        _lib.horovod_reducescatter,
        tensors,
        op,
        name,
        prescale_factor,
        postscale_factor,
        grouped,
        process_set_id,
    )


# The splits dtypes the kernel reads; it checks the values as given (integers, 1-D, fitting its
# int32 received splits), and the engine the count, sign and sum.
_SPLITS_DTYPES = (
    tf.int8,
    tf.uint8,
    tf.int16,
    tf.uint16,
    tf.int32,
    tf.uint32,
    tf.int64,
    tf.uint64,
    tf.float16,
    tf.bfloat16,
    tf.float32,
    tf.float64,
    tf.bool,
)


def _splits_input(splits):
    """(splits as a tensor of the dtype given, "") without a cast, or (empty int32 splits, why
    they cannot be a tensor the kernel reads). Either way the op is submitted: the kernel hands
    the reason to the engine, which fails the op on every rank with it."""
    try:
        t = tf.convert_to_tensor(splits)
    except (TypeError, ValueError, OverflowError) as e:
        why = f"alltoall splits are not a tensor of integers ({e}), got {splits!r}"
        return tf.zeros([0], tf.int32), why
    if t.dtype not in _SPLITS_DTYPES:
        return tf.zeros([0], tf.int32), (
            f"alltoall splits must be integers, got {t.dtype.name} splits {splits!r}"
        )
    return t, ""


@tf.autograph.experimental.do_not_convert
def _alltoall(tensor, splits, name=None, process_set_id=0):
    _check_initialized()
    node, key = _names("Alltoall", name, tensor, process_set_id)
    bad = _check_dtypes("Alltoall", [tensor])
    if bad:
        out = _invalid("Alltoall", [tensor], node, key, bad, process_set_id=process_set_id)[0]
        with tf.control_dependencies([out]):  # never produced: the op fails on every rank
            return out, tf.zeros([_set_rank_and_size(process_set_id)[1]], tf.int32)
    splits, why = _splits_input(splits)
    return _create(
        _lib.horovod_alltoall,
        tensor,
        splits,
        key,
        splits_error=why,
        process_set_id=process_set_id,
        name=node,
    )


# ---- topology as ops: evaluated when the graph runs, not when it is built (upstream's names)


def rank_op(name=None):
    """This process's rank, as an int32 scalar computed when the op runs."""
    return _lib.horovod_rank(name=name)


def local_rank_op(name=None):
    """This process's rank on its host, as an int32 scalar computed when the op runs."""
    return _lib.horovod_local_rank(name=name)


def size_op(process_set_id=0, name=None):
    """The number of ranks (of the process set), as an int32 scalar computed when the op runs;
    a set that does not exist then fails the op."""
    return _lib.horovod_size(process_set_id=process_set_id, name=name)


def local_size_op(name=None):
    """The number of ranks on this host, as an int32 scalar computed when the op runs."""
    return _lib.horovod_local_size(name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 if this process is in the process set (0 if not), as an int32 scalar computed when
    the op runs; a set that does not exist then fails the op."""
    return _lib.horovod_process_set_included(process_set_id=process_set_id, name=name)


for _op_name in ("Rank", "LocalRank", "Size", "LocalSize", "ProcessSetIncluded"):
    tf.no_gradient(f"Horovod{_op_name}")


# ---- gradients (of the op, for every tensor it carries) ------------------------------------
# They go through the wrappers above, so that their ops are named like any other.


@tf.RegisterGradient("HorovodAllreduce")
def _allreduce_grad(op, *grads):
    # d(allreduce)/dx is the same reduction of the incoming gradients (Sum, Average, scaled).
    # Adasum, as upstream: the same op on the gradients (not its exact derivative).
    return list(
        _allreduce(
            list(grads),
            op=op.get_attr("reduce_op"),
            prescale_factor=op.get_attr("prescale_factor"),
            postscale_factor=op.get_attr("postscale_factor"),
            process_set_id=op.get_attr("process_set_id"),
        )
    ) + [None]


@tf.RegisterGradient("HorovodAllgather")
def _allgather_grad(op, *grads):
    # Each rank's loss depends on every rank's rows: average the gradients (as optimizers
    # average), then keep this rank's rows.
    out = []
    pid = op.get_attr("process_set_id")
    set_rank = _set_rank_and_size(pid)[0]
    for x, grad in zip(op.inputs[:-1], grads):
        grad = _allreduce([grad], op=Average, process_set_id=pid)[0]
        rows = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
        all_rows = _allgather([rows], process_set_id=pid)[0]
        start = tf.reduce_sum(all_rows[:set_rank])
        begin = tf.concat([[start], tf.zeros([tf.rank(grad) - 1], tf.int64)], 0)
        out.append(tf.slice(grad, begin, tf.shape(x, out_type=tf.int64)))
    return out + [None]


@tf.RegisterGradient("HorovodBroadcast")
def _broadcast_grad(op, *grads):
    # Only the root's input reaches the outputs: it gets the averaged gradient, others zero.
    reduced = _allreduce(list(grads), op=Average, process_set_id=op.get_attr("process_set_id"))
    if _b.rank() != op.get_attr("root_rank"):
        reduced = [g * 0 for g in reduced]
    return list(reduced) + [None]


@tf.RegisterGradient("HorovodReducescatter")
def _reducescatter_grad(op, *grads):
    # Each input row reaches one rank's output through the reduction: gather the rows' grads,
    # scaled as upstream defines it: by the scale factors, and by the set's size for Sum (n times
    # the derivative of the sum of the ranks' losses, for Sum and Average alike).
    pid = op.get_attr("process_set_id")
    gathered = _allgather(list(grads), process_set_id=pid)
    scale = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if op.get_attr("reduce_op") == int(Sum):
        scale *= _set_rank_and_size(pid)[1]
    # tf.constant, not tf.cast: casting a Python float goes through float32 first, which
    # rounded 1/size (e.g. 1/3) in float64 gradients.
    return [g * tf.constant(scale, g.dtype) if scale != 1.0 else g for g in gathered] + [None]


@tf.RegisterGradient("HorovodAlltoall")
def _alltoall_grad(op, grad, _splits_grad):
    # The rows go back where they came from.
    back, _ = _alltoall(grad, op.outputs[1], process_set_id=op.get_attr("process_set_id"))
    return [back, None, None]
