"""fp16 compression, tf.IndexedSlices, broadcast_variables, the object collectives, edge
shapes and inputs."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tests.support.reference_tf import make, reference, seed
from tests.support.scenario import expect_error


def sc_extras():
    r, n = hvd.rank(), hvd.size()
    _fp16_compression(r, n)
    _indexed_slices(r, n)
    _broadcast_variables(r, n)
    _objects(r, n)
    _edge_inputs(r, n)


def _fp16_compression(r, n):
    """sc_extras' fp16 compression: floats travel as float16, come back in their dtype."""
    # fp16 compression: floats travel as float16 and come back in their dtype.
    x = tf.fill([6], tf.constant(1.0 + 2.0**-13, tf.float32))  # not representable in float16
    exact = hvd.allreduce(x, op=hvd.Sum, name="fp16/none")
    squeezed = hvd.allreduce(x, op=hvd.Sum, name="fp16/on", compression=hvd.Compression.fp16)
    assert exact.dtype == squeezed.dtype == tf.float32
    assert (exact.numpy() == np.float32(n * (1.0 + 2.0**-13))).all(), exact
    assert (squeezed.numpy() == n).all(), f"fp16 compression did not round: {squeezed}"
    specs = [(tf.float32, (40, 30, 30)), (tf.float64, (7,)), (tf.int32, (5,)), (tf.float16, (3,))]
    xs = [make(r, s, dt, salt=i)[0] for i, (dt, s) in enumerate(specs)]
    wants = [
        reference([make(q, s, dt, salt=i)[1] for q in range(n)], "average", dt)
        for i, (dt, s) in enumerate(specs)
    ]
    grouped = hvd.grouped_allreduce(xs, compression=hvd.Compression.fp16)
    traced = tf.function(lambda ts: hvd.grouped_allreduce(ts, compression=hvd.Compression.fp16))(xs)
    singles = [hvd.allreduce(t, compression=hvd.Compression.fp16) for t in xs]
    for mode, outs in (("grouped", grouped), ("function", traced), ("single", singles)):
        for i, ((dt, _s), got) in enumerate(zip(specs, outs)):
            assert got.dtype == dt, (mode, i, got.dtype)
            g = tf.cast(got, tf.float64).numpy()
            assert np.allclose(g, wants[i], rtol=1e-2, atol=1e-2), f"fp16 {mode} #{i}"


def _indexed_slices(r, n):
    """sc_extras' tf.IndexedSlices: gathered values and indices."""

    # tf.IndexedSlices: reduced by gathering values and indices (as upstream); Average divides
    # the values by the number of ranks.
    def slices(q):
        rng = np.random.default_rng(seed("slices", q))
        k = q + 1
        return rng.uniform(-1, 1, (k, 3)), rng.integers(0, 10, k)

    values, indices = slices(r)
    sl = tf.IndexedSlices(
        tf.constant(values, tf.float32),
        tf.constant(indices, tf.int64),
        dense_shape=tf.constant([10, 3], tf.int64),
    )
    all_values = np.concatenate([slices(q)[0] for q in range(n)])
    all_indices = np.concatenate([slices(q)[1] for q in range(n)])
    for mode, fn in (
        ("eager", lambda s, **kw: hvd.allreduce(s, **kw)),
        ("function", tf.function(lambda s, **kw: hvd.allreduce(s, **kw))),
    ):
        for op, scale in ((hvd.Sum, 1.0), (hvd.Average, 1.0 / n)):
            got = fn(sl, op=op)
            assert isinstance(got, tf.IndexedSlices), (mode, type(got))
            assert np.allclose(got.values.numpy(), all_values * scale, rtol=1e-6), (mode, op)
            assert got.indices.numpy().tolist() == all_indices.tolist(), (mode, op)
            assert got.dense_shape.numpy().tolist() == [10, 3]
    expect_error(lambda: hvd.allreduce(sl, op=hvd.Max), NotImplementedError, "Sum or Average")
    expect_error(lambda: hvd.allreduce(sl, prescale_factor=2.0), NotImplementedError, "scale")


def _broadcast_variables(r, n):
    """sc_extras' broadcast_variables of every dtype group, eager and traced."""

    # broadcast_variables: every dtype group takes the root's values, eager and traced.
    def variables():
        return [
            tf.Variable(tf.fill([3, 2], float(r + 1))),
            tf.Variable(tf.constant([r, 10 * r], tf.int64)),
            tf.Variable(tf.fill([4], r % 2 == 1)),
            tf.Variable(tf.fill([2], tf.constant(-r, tf.float64))),
            tf.Variable(tf.fill([1], float(r + 5))),
        ]

    def want_vars(root):
        return [
            np.full([3, 2], root + 1.0),
            [root, 10 * root],
            np.full([4], root % 2 == 1),
            np.full([2], -float(root)),
            [root + 5.0],
        ]

    for root in sorted({0, n - 1}):
        vs = variables()
        assert hvd.broadcast_variables(vs, root_rank=root) is None
        for v, want in zip(vs, want_vars(root)):
            assert (v.numpy() == np.asarray(want)).all(), (root, v)
        vs = variables()

        @tf.function
        def in_graph():
            hvd.broadcast_variables(vs, root_rank=root)  # a group of assigns, run for effect

        in_graph()
        for v, want in zip(vs, want_vars(root)):
            assert (v.numpy() == np.asarray(want)).all(), ("function", root, v)
    assert hvd.broadcast_variables([]) is None


def _objects(r, n):
    """sc_extras' broadcast_object and allgather_object of objects sized by rank."""
    # broadcast_object / allgather_object: any picklable object, of a size differing by rank.
    obj = {"rank": r, "payload": np.arange(r * 100, dtype=np.int32), "name": "x" * r}
    for root in range(n):
        got = hvd.broadcast_object(obj, root_rank=root)
        assert got["rank"] == root and got["name"] == "x" * root
        assert (got["payload"] == np.arange(root * 100)).all()
    got = hvd.broadcast_object_fn(root_rank=n - 1)([r] * (r + 1))
    assert got == [n - 1] * n, got
    gathered = hvd.allgather_object(obj)
    assert [g["rank"] for g in gathered] == list(range(n))
    assert all((g["payload"] == np.arange(q * 100)).all() for q, g in enumerate(gathered))
    assert hvd.allgather_object(None) == [None] * n
    assert hvd.allgather_object(("t", r), name="tuples") == [("t", q) for q in range(n)]


def _edge_inputs(r, n):
    """sc_extras' edge shapes and inputs: scalars, empty tensors, variables, NumPy."""
    # Edge shapes and inputs: scalars, empty tensors, fewer rows than ranks, variables and
    # NumPy arrays as inputs.
    traced = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum), autograph=False)
    for mode, reduce_sum in (("eager", lambda t: hvd.allreduce(t, op=hvd.Sum)), ("fn", traced)):
        got = reduce_sum(tf.constant(r + 1.0))
        assert got.shape == () and float(got) == n * (n + 1) / 2, (mode, got)
        got = reduce_sum(tf.zeros([0, 3], tf.int32))
        assert got.shape == (0, 3) and got.dtype == tf.int32, (mode, got)
    got = hvd.broadcast(tf.constant(float(r)), root_rank=n - 1)
    assert got.shape == () and float(got) == n - 1, got
    assert hvd.broadcast(tf.zeros([0, 2]), 0).shape == (0, 2)
    assert hvd.allgather(tf.zeros([0, 2, 2])).shape == (0, 2, 2)
    got = hvd.alltoall(tf.zeros([0, 2]))  # no splits: the tensor alone
    assert got.shape == (0, 2), got
    got = hvd.reducescatter(tf.ones([1, 2]), op=hvd.Sum)  # one row: rank 0 gets it
    assert got.shape == ((1, 2) if r == 0 else (0, 2)) and (got.numpy() == n).all(), got
    expect_error(lambda: hvd.allgather(tf.constant(1.0)), tf.errors.InvalidArgumentError, "scalar")
    got = hvd.allreduce(tf.Variable([1.0, r]), op=hvd.Sum)
    assert got.numpy().tolist() == [n, n * (n - 1) / 2], got
    got = hvd.allreduce(np.arange(3, dtype=np.float64), op=hvd.Sum)
    assert got.dtype == tf.float64 and got.numpy().tolist() == [0, n, 2 * n], got
    assert hvd.grouped_allreduce([]) == [] and hvd.grouped_allgather([]) == []


def sc_objects():
    """The object collectives name their ops the same on every rank, whatever each rank passes:
    before, they were named after the local object's type, so the usual
    broadcast_object(obj if hvd.rank() == 0 else None) never met across ranks."""
    r, n = hvd.rank(), hvd.size()
    cfg = {"lr": 0.1, "layers": [3, 4], "tag": "run"}
    assert hvd.broadcast_object(cfg if r == 0 else None) == cfg
    got = hvd.broadcast_object(cfg if r == n - 1 else None, root_rank=n - 1, name="cfg")
    assert got == cfg, got
    for i in range(3):  # unnamed and repeated: numbered alike on every rank
        assert hvd.broadcast_object((i, "x" * i) if r == 0 else [r]) == (i, "x" * i)
    assert hvd.broadcast_object_fn(root_rank=0)(cfg if r == 0 else r) == cfg
    assert hvd.broadcast_object_fn(root_rank=0, name="fn")(cfg if r == 0 else None) == cfg

    def local(q):  # a different type on each rank
        return [q, f"rank {q}", (q, [q] * q), None, {"q": q}][q % 5]

    want = [local(q) for q in range(n)]
    assert hvd.allgather_object(local(r)) == want
    assert hvd.allgather_object(local(r), name="mixed") == want
    assert hvd.allgather_object(local(r), name="mixed") == want
