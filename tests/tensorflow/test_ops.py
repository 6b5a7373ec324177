"""horovod.tensorflow's ops under real MPI ranks (2 and 3), against NumPy references.

The eager-mode scenarios share one launch per world size (module fixture `ops`): importing
TensorFlow costs seconds per rank, and each scenario prints its own verdict, so every test
below still reports on its own scenario. Graph mode (tf.compat.v1) needs a process of its own;
the import-time and pre-init checks run in one plain process each, without mpirun.
"""

import json

from tests.support import mpi
from tests.support.fixtures import per_world
from tests.support.mpi import TF_OPS

BATCH = [
    "allreduce",
    "allgather",
    "broadcast",
    "alltoall",
    "reducescatter",
    "steady",
    "gradients",
    "extras",
    "tape",
    "frontends",
    "while_loop",
    "errors",
    "alltoall_splits",
    "objects",
    "dtypes",
    "group_sizes",
    "duplicate_names",
    "one_rank_args",
    "topology_ops",
    "broadcast_inplace",
    "grouped_reducescatter",
    "alltoall_upstream",
    "grouped_sparse",
    "sparse_training",
    "rank_dependent_names",
    "objects_in_function",
    "objects_in_graph_mode",
]


@per_world(2, 3)
def ops(request, tmp_path_factory):
    timeline = tmp_path_factory.mktemp(f"np{request.param}") / "timeline.json"
    batch = TF_OPS.run_batch(request.param, BATCH, env={"HOROVOD_TIMELINE": str(timeline)})
    batch.timeline = timeline
    return batch


def test_allreduce(ops):
    """Every reduce dtype (uint8 ... float64, bfloat16) x 1-3 dims (one shape large enough for
    the ring) x Sum/Average/Min/Max/Product, eagerly (named and unnamed) and in a tf.function
    holding all of them at once (called twice); prescale/postscale on floats; inputs left
    intact, temporaries reduced in place; average=; bool/complex rejected (see test_dtypes);
    grouped_allreduce of mixed dtypes in input order (eager, unnamed, tf.function)."""
    ops.check("allreduce")


def test_allgather(ops):
    """Every dtype incl. bool x 1-3 dims, first dimensions differing by rank (one rank with
    none), eager and tf.function; grouped_allgather of mixed dtypes."""
    ops.check("allgather")


def test_broadcast(ops):
    """Every dtype incl. bool x 1-3 dims x every root, eager and tf.function; a large
    temporary input; NumPy integer roots; non-integer roots fail on every rank."""
    ops.check("broadcast")


def test_alltoall(ops):
    """Every dtype incl. bool x 1-3 dims with explicit uneven splits (with zeros), eager and
    tf.function (splits as a tensor), checking the received splits too; default (even) splits,
    where only the tensor is returned."""
    ops.check("alltoall")


def test_reducescatter(ops):
    """Every reduce dtype x 1-3 dims (uneven rows: the first ranks get one more) x Sum/Average,
    eager and tf.function; default op Average; scale factors."""
    ops.check("reducescatter")


def test_topology_ops(ops):
    """rank_op, size_op, local_rank_op, local_size_op, process_set_included_op (issue 21):
    int32 scalars equal to hvd.rank() ..., eager and in a tf.function (evaluated when it runs);
    a process set other than the global one fails, naming why."""
    ops.check("topology_ops")


def test_broadcast_inplace(ops):
    """broadcast_ (issue 21) assigns root_rank's values to variables of mixed dtypes (int16 and
    bool included) and shapes, for every root, eager and in a tf.function (called twice), and
    returns them; a variable list whose length differs on one rank fails on every rank."""
    ops.check("broadcast_inplace")


def test_grouped_reducescatter(ops):
    """grouped_reducescatter (issue 21): mixed dtypes and uneven rows, Sum and Average, named,
    unnamed and in a tf.function, scale factors and fp16 compression, against NumPy; group
    sizes that differ fail on every rank naming the counts."""
    ops.check("grouped_reducescatter")


def test_alltoall_upstream_semantics(ops):
    """alltoall as upstream (issue 21): without splits the tensor alone, with splits also the
    received splits; a first dimension the ranks do not divide is InvalidArgumentError on
    every rank (eager, in a tf.function with a shape known only at run time, and when only
    one rank's does not divide, naming that rank), and the next op works."""
    ops.check("alltoall_upstream")


def test_timeline_started_and_stopped_at_run_time(world, tmp_path):
    """start_timeline(path, mark_cycles) / stop_timeline() (issue 21) under
    HOROVOD_TIMELINE=DYNAMIC: rank 0 writes a complete JSON file with exactly the ops between
    start and stop (eager and tf.function), CYCLE_START marks when asked, a new file on the next
    start; other ranks write nothing; an unwritable path is a ValueError on rank 0."""
    TF_OPS.run_ok(
        world,
        "timeline_runtime",
        env={"HOROVOD_TIMELINE": "DYNAMIC", "HVD_TEST_TIMELINE_DIR": str(tmp_path)},
    )
    assert not (tmp_path / "DYNAMIC").exists()


# The ops of sc_steady's tf.function (node names: the function's name and a number per kind,
# in the order traced; ".<i>" per tensor of the grouped op) and its eager op, each submitted
# STEADY_STEPS (eager: half as many) times.
STEADY_NAMES = [
    "HorovodAllreduce_step_0",
    "HorovodAllreduce_step_1.0",
    "HorovodAllreduce_step_1.1",
    "HorovodAllgather_step_0",
    "HorovodBroadcast_step_0",
    "steady/eager",
]
STEADY_STEPS = 60


def test_steady_state_takes_the_cached_path(ops):
    """A tf.function called 60 times keeps giving right answers without retracing, and the
    engine negotiates its ops through the response cache: the timeline shows one negotiation
    per step for each op, but the per-rank "ready" ticks of the slow path (one per rank) only
    for the first step."""
    ops.check("steady")
    events = json.loads(ops.timeline.read_text())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    for name in STEADY_NAMES:
        pids = [pid for pid, n in names.items() if n == name]
        assert pids, f"{name} is not in the timeline: {sorted(set(names.values()))[:40]}"
        mine = [e for e in events if e.get("pid") == pids[0]]
        negotiations = sum(1 for e in mine if e["ph"] == "B" and e["name"].startswith("NEGOTIATE"))
        ticks = sum(1 for e in mine if e["ph"] == "X")
        steps = STEADY_STEPS // 2 if "/" in name else STEADY_STEPS
        assert negotiations == steps, f"{name}: {negotiations} negotiations for {steps} steps"
        assert ticks <= 2 * ops.np, f"{name}: {ticks // ops.np} slow-path negotiations"


def test_gradients(ops):
    """tape.gradient through allreduce (Sum, Average, with scale factors), grouped_allreduce
    (an unused output gives zeros), allgather, broadcast (root and non-root), alltoall and
    reducescatter (Sum, Average, with scale factors), eager and in a tf.function, against an
    analytic reference per element and a finite difference of the global objective along a
    random direction. The objectives (sum of the ranks' losses; their mean for allgather and
    broadcast, n times their sum for reducescatter, as upstream) are documented above
    sc_gradients in scenarios_ops_gradients.py."""
    ops.check("gradients")


def test_compression_sparse_variables_objects(ops):
    """fp16 compression (values really travel as float16; dtypes restored; grouped and in a
    tf.function); tf.IndexedSlices allreduce = gathered values (divided by size for Average)
    and indices, eager and traced, other ops and scale factors refused; broadcast_variables of
    mixed dtypes from several roots, eager and traced; broadcast_object, broadcast_object_fn
    and allgather_object with rank-dependent sizes."""
    ops.check("extras")


def test_distributed_gradient_tape(ops):
    """DistributedGradientTape gives the mean of the ranks' local gradients (computed
    locally with plain tapes), eager and in a tf.function: default (the embedding's gradient
    stays tf.IndexedSlices), sparse_as_dense, gradient_predivide_factor, num_groups, groups,
    fp16 compression, op=Sum, nested sources; None gradients stay None; SGD on the result
    keeps the ranks' weights identical."""
    ops.check("tape")


def test_numpy_and_tensorflow_frontends_share_the_engine(ops):
    """horovod.numpy and horovod.tensorflow in one process: one init, the same topology,
    NumPy async ops in flight while TF eager and tf.function ops run, named and unnamed."""
    ops.check("frontends")


def test_ops_in_a_parallel_while_loop(ops):
    """Iterations of one node in flight at once get names of their own (loop frame and
    iteration): before, 'already in flight' on one rank while the others waited."""
    ops.check("while_loop")


def test_errors(ops):
    """Mismatched dtype, shape, reduce op, root, trailing dims, scale factors, one tensor of a
    group and op kind raise tf.errors.FailedPreconditionError on every rank, naming the tensor
    (ours eagerly, the node name in a tf.function) and the ranks on each side, within 10 s;
    also after the name was cached, and for a tf.function retraced on one rank. A bad root
    (on every rank, or on one) and bad alltoall splits raise InvalidArgumentError everywhere.
    The next op works after each. (Adasum: test_adasum.py.)"""
    ops.check("errors")


def test_dtypes(ops):
    """Issue 17. bool is its own dtype: bool on one rank and uint8 on another is a named
    mismatch, bool reductions a named InvalidArgumentError. Integer scale factors are refused,
    named. Dtypes no kernel takes (string, complex64/128, uint16, int16) raise
    InvalidArgumentError naming the op, the tensor, the dtype and the supported ones, on every
    rank, for every op (eager named and unnamed, tf.function), also when only one rank has the
    bad dtype (the others fail within 10 s instead of waiting), and a valid op before the bad
    one in the same tf.function still runs. The Python check's dtype lists are the kernels'."""
    ops.check("dtypes")


def test_bad_alltoall_splits_fail_on_every_rank_as_given(ops):
    """Alltoall splits are checked as given, before any conversion: int64 splits beyond int32
    (before: wrapped, and the op ran), floats (before: truncated), 2-D, negative, too many,
    not even a tensor (2**64, ragged, strings); and a scalar tensor (before: an unnamed error
    inside TensorFlow). Each raises InvalidArgumentError on every rank naming the tensor and
    showing the values, when every rank or only rank 1 passes them, eagerly and in a
    tf.function, also with splits known only at run time; the next op works. Other integer
    dtypes and int64 splits that fit work; received splits stay int32."""
    ops.check("alltoall_splits")


def test_object_collectives_match_whatever_each_rank_passes(ops):
    """broadcast_object with the root's dict and None elsewhere (before: ops named after each
    rank's type, which never met: a hang), named and unnamed, repeated, and through
    broadcast_object_fn; allgather_object of a different type on each rank."""
    ops.check("objects")


def test_group_sizes_must_agree(ops):
    """A variable on rank 0 only: grouped ops, broadcast_variables and the gradient tape fail on
    every rank naming each rank's group size (before: results on some ranks, a wait on rank 0)."""
    ops.check("group_sizes")


def test_one_name_twice_in_a_function_is_two_ops(ops):
    """Two ops given one name in a tf.function each pair with their namesake on every rank
    (before: one was refused per rank, the other paired with the peer's other tensor)."""
    ops.check("duplicate_names")


def test_bad_argument_on_one_rank_fails_every_rank(ops):
    """root_rank=0.0, an unknown op, a non-numeric factor on rank 1 only: every rank fails,
    naming rank 1 (before: the others waited)."""
    ops.check("one_rank_args")


def test_grouped_allreduce_of_indexed_slices(ops):
    """grouped_allreduce of tf.IndexedSlices alone and mixed with dense tensors (issue 21, as
    upstream): dense members reduced, slices gathered (Average divides the values), eager and
    in a tf.function, named and unnamed; Max or scale factors raise before any op."""
    ops.check("grouped_sparse")


def test_training_with_sparse_gradients(ops):
    """An embedding (tf.gather: IndexedSlices gradients) and a dense weight trained by SGD
    through DistributedGradientTape and the Keras DistributedOptimizer, sparse_as_dense False
    and True, eager and in a tf.function: weights equal a float64 NumPy reference on every
    rank."""
    ops.check("sparse_training")


def test_unnamed_ops_in_a_function_named_alike_on_every_rank(ops):
    """Regression (issue 21): rank 0 built one more Keras layer and traced one more function,
    and the ops run under a per-rank name scope; the unnamed ops of a tf.function (tape,
    allreduce, allgather, broadcast, grouped) still meet. Before, they were named after their
    input tensors and scopes and every rank waited for the others' (a hang)."""
    ops.check("rank_dependent_names")


def test_object_collectives_inside_a_function(ops):
    """broadcast_object / allgather_object inside a tf.function: exchanged when traced, the
    Python objects reach the trace; retraced, exchanged again (issue 21)."""
    ops.check("objects_in_function")


def test_object_collectives_in_v1_graph_mode(ops):
    """broadcast_object / allgather_object / broadcast_object_fn in tf.compat.v1 graph mode,
    through the session given or the default one (as upstream); none: a RuntimeError."""
    ops.check("objects_in_graph_mode")


def test_batch_exits_cleanly(ops):
    assert ops.rc == 0, f"rc={ops.rc}\n{ops.out[-3000:]}\n{ops.err[-3000:]}"


def test_v1_graph_monitored_training_session(world):
    """The original Horovod example: tf.compat.v1 graph mode, hvd.DistributedOptimizer around
    GradientDescentOptimizer, BroadcastGlobalVariablesHook(0) in a MonitoredTrainingSession.
    Ranks start from different weights: after the hook they hold rank 0's, after every step
    identical weights, and the (rank-averaged) loss falls by 100x in 40 steps."""
    TF_OPS.run_ok(world, "v1_graph")


def test_v1_graph_backward_passes_per_step(world):
    """hvd.DistributedOptimizer(v1 optimizer, backward_passes_per_step=2) in graph mode under
    MonitoredTrainingSession + BroadcastGlobalVariablesHook(0): GradientDescent with
    average_aggregated_gradients False and True, Momentum with True; dense weights and an
    embedding (IndexedSlices gradients); a batch of its own per rank and pass. After every run
    of the train op all ranks hold identical weights equal to a float64 NumPy reference:
    unchanged after odd runs, after even runs updated with the sum (mean) over the 2 passes of
    the rank-averaged gradients. compute_gradients() gives local gradients; accumulators and
    counter are non-trainable LOCAL_VARIABLES; the graph has no allreduce outside the cond;
    global_step counts every run. Details above sc_v1_accumulate in scenarios_ops_v1.py."""
    TF_OPS.run_ok(world, "v1_accumulate")


def test_op_before_init_and_single_process():
    """Before hvd.init(), ops raise ValueError (eagerly and when a tf.function traces them);
    after init in a single process (no mpirun), ops and the tape work on one rank."""
    code = """
import numpy as np, tensorflow as tf
import horovod.tensorflow as hvd
x = tf.ones([2, 3])
v = tf.Variable([1.0, 2.0])
calls = [lambda: hvd.allreduce(x), lambda: hvd.grouped_allreduce([x]), lambda: hvd.allgather(x),
         lambda: hvd.broadcast(x, 0), lambda: hvd.alltoall(x), lambda: hvd.reducescatter(x),
         lambda: hvd.broadcast_variables([v]), lambda: hvd.broadcast_object(1),
         tf.function(lambda: hvd.allreduce(x)), hvd.rank, hvd.size]
for i, f in enumerate(calls):
    try:
        f()
    except ValueError as e:
        assert "hvd.init()" in str(e), (i, e)
    else:
        raise SystemExit(f"call {i} did not raise")
hvd.init()
assert hvd.size() == 1 and hvd.rank() == 0
assert (hvd.allreduce(x).numpy() == 1).all() and hvd.allgather(x).shape == (2, 3)
got = hvd.alltoall(x)
assert got.shape == (2, 3)
assert (hvd.reducescatter(x, op=hvd.Sum).numpy() == 1).all()
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(v * v)
g = hvd.DistributedGradientTape(tape).gradient(loss, v)
assert g.numpy().tolist() == [2.0, 4.0]
print("fine")
"""
    p = mpi.python(code, tf=True)
    assert p.returncode == 0 and "fine" in p.stdout, p.stdout + p.stderr


def test_version_mismatch_asks_for_a_rebuild(tmp_path):
    """mpi_ops checks the TF version stamped at build time against the running TF: another
    major.minor gives an ImportError saying 'rebuild' with both versions; another patch
    release, or no stamp, loads. The stamp path is pointed at a temp file (the tree is not
    touched)."""
    stamp = tmp_path / "mpi_lib.tf_version"
    code = f"""
import os, tensorflow as tf
import horovod.tensorflow.mpi_ops as m
stamp = {str(stamp)!r}
m._STAMP_PATH = stamp
open(stamp, "w").write("2.0.0\\n")
try:
    m._load_library()
except ImportError as e:
    msg = str(e)
    assert "rebuild" in msg and "2.0.0" in msg and tf.__version__ in msg, msg
    major_minor = ".".join(tf.__version__.split(".")[:2])
    assert f"against TensorFlow {{major_minor}}" in msg, msg
else:
    raise SystemExit("a TF 2.0.0 stamp was accepted")
open(stamp, "w").write(".".join(tf.__version__.split(".")[:2]) + ".99\\n")
assert m._load_library() is not None
os.remove(stamp)
assert m._load_library() is not None
print("fine")
"""
    p = mpi.python(code, tf=True)
    assert p.returncode == 0 and "fine" in p.stdout, p.stdout + p.stderr
