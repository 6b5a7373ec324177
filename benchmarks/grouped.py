"""Per-tensor costs of grouped allreduces (issue 20, part 2), float32 sum, medians of rank 0:
mpirun -np N python benchmarks/grouped.py            # one line:
  grouped: 100 x 40 KiB through grouped_allreduce; whole(out): one 4000 KiB tensor into an
  `out`; whole(alloc): the same without `out`; ratio grouped / whole(out); tiny100: 100
  one-element tensors grouped (the per-tensor work, nothing to move)
mpirun -np N python benchmarks/grouped.py --outputs  # the same group through the binding, with
  the same output arrays every call ('same'), new NumPy arrays every call ('fresh'), and
  one 4000 KiB tensor ('whole'), interleaved: what fresh outputs cost
mpirun -np N python benchmarks/grouped.py --layouts  # 100 x 40 KiB grouped from separate arrays
  ('sep') and from views of one array ('views'), and one 4000 KiB tensor ('whole'): what
  inputs that do not lie back to back cost the ring (its chunks are packed through scratch)
mpirun -np N python benchmarks/grouped.py --model MobileNetV2   # a model's gradients: the float32
  shapes of a keras.applications model's trainable variables (32x32 images, 1000 classes, as
  the synthetic benchmark builds it) grouped, against one tensor of the same total
mpirun -np N python benchmarks/grouped.py --model MobileNetV2 --layouts   # --layouts over the
  model's shapes, plus only its tensors of 16 KiB and up (the ring's own pieces) grouped:
  from separate arrays ('large'), from views of one array ('large_views'), and in place in
  those views ('large_inplace'); medians of 5 interleaved rounds
mpirun -np N python benchmarks/grouped.py --model MobileNetV2 --pages   # what 4 KiB pages cost
  against 2 MiB (transparent huge) pages: one tensor of the model's size into an `out`, and its
  tensors of 16 KiB and up grouped from pieces of one array with gaps between them (so they do
  not lie back to back), the array on huge pages or not; medians of 5 interleaved rounds
"""

import os
import statistics
import sys
import time

import numpy as np

import horovod.numpy as hvd
from horovod.common import basics as _b

hvd.init()
from runner import per_op_us  # noqa: E402  (after hvd.init: it imports mpi4py)

ELEMS_4K = 1024  # float32 elements in 4 KiB


def median_us(fn):
    return per_op_us(fn, n=60, warm=5)


def print_interleaved_medians(runs, rounds=5):
    """Rank 0 prints each run's median over `rounds` rounds that take every run in turn (a noisy
    moment hits them all alike), us per op."""
    samples = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            samples[k].append(per_op_us(fn, n=30, warm=3))
    if hvd.rank() == 0:
        print({k: round(statistics.median(v)) for k, v in samples.items()}, flush=True)


def grouped_into(names, parts, outs, group):
    """One grouped allreduce (sum) into `outs` through the binding (grouped_allreduce takes no
    `out`)."""
    lib = _b._lib()
    lib.wait(
        lib.enqueue(
            0, names, parts, outs, int(hvd.Sum), 0, 1.0, 1.0, [], group=group, process_set=0
        ),
        -1.0,
    )


def frontend():
    parts = [np.ones(10 * ELEMS_4K, np.float32) for _ in range(100)]
    tiny = [np.ones(1, np.float32) for _ in range(100)]
    whole = np.ones(1000 * ELEMS_4K, np.float32)
    out = np.empty_like(whole)
    g = median_us(lambda: hvd.grouped_allreduce(parts, op=hvd.Sum, name="g"))
    w = median_us(lambda: hvd.allreduce(whole, op=hvd.Sum, name="w", out=out))
    wn = median_us(lambda: hvd.allreduce(whole, op=hvd.Sum, name="wn"))
    t = median_us(lambda: hvd.grouped_allreduce(tiny, op=hvd.Sum, name="t"))
    if hvd.rank() == 0:
        print(
            f"grouped {g:.0f} whole(out) {w:.0f} whole(alloc) {wn:.0f} ratio {g / w:.2f} "
            f"tiny100 {t:.0f}",
            flush=True,
        )


def outputs():
    parts = [np.ones(10 * ELEMS_4K, np.float32) for _ in range(100)]
    names = [f"t.{i}" for i in range(100)]
    outs = [np.empty(10 * ELEMS_4K, np.float32) for _ in range(100)]
    whole = np.ones(1000 * ELEMS_4K, np.float32)
    wout = np.empty_like(whole)
    samples = {"same": [], "fresh": [], "whole": []}
    for _ in range(400):
        for mode in samples:
            t0 = time.perf_counter()
            if mode == "whole":
                hvd.allreduce(whole, op=hvd.Sum, name="w", out=wout)
            else:
                o = outs if mode == "same" else [np.empty_like(p) for p in parts]
                grouped_into(names, parts, o, "t")
            samples[mode].append(time.perf_counter() - t0)
    if hvd.rank() == 0:
        print({k: round(statistics.median(v[50:]) * 1e6) for k, v in samples.items()}, flush=True)


def layouts():
    block = np.ones(100 * 10 * ELEMS_4K, np.float32)
    views = np.split(block, 100)
    sep = [np.ones(10 * ELEMS_4K, np.float32) for _ in range(100)]
    whole = np.ones(100 * 10 * ELEMS_4K, np.float32)
    out = np.empty_like(whole)
    r = {
        "views": median_us(lambda: hvd.grouped_allreduce(views, op=hvd.Sum, name="v")),
        "sep": median_us(lambda: hvd.grouped_allreduce(sep, op=hvd.Sum, name="s")),
        "whole": median_us(lambda: hvd.allreduce(whole, op=hvd.Sum, name="w", out=out)),
    }
    if hvd.rank() == 0:
        print({k: round(v) for k, v in r.items()}, flush=True)


def model_layouts(sizes):
    sep = [np.ones(s, np.float32) for s in sizes]
    block = np.ones(sum(sizes), np.float32)
    views = np.split(block, np.cumsum(sizes)[:-1])
    large = [p for p in sep if p.nbytes >= 16 << 10]
    large_sizes = [p.size for p in large]
    large_views = np.split(np.ones(sum(large_sizes), np.float32), np.cumsum(large_sizes)[:-1])
    large_names = [f"mli.{i}" for i in range(len(large))]
    whole = np.ones(sum(sizes), np.float32)
    out = np.empty_like(whole)
    runs = {
        "sep": lambda: hvd.grouped_allreduce(sep, op=hvd.Sum, name="ms"),
        "views": lambda: hvd.grouped_allreduce(views, op=hvd.Sum, name="mv"),
        "large": lambda: hvd.grouped_allreduce(large, op=hvd.Sum, name="ml"),
        "large_views": lambda: hvd.grouped_allreduce(large_views, op=hvd.Sum, name="mlv"),
        "large_inplace": lambda: grouped_into(large_names, large_views, large_views, "mli"),
        "whole": lambda: hvd.allreduce(whole, op=hvd.Sum, name="mw", out=out),
    }
    print_interleaved_medians(runs)


def model_pages(sizes):
    from numpy.core import multiarray  # NumPy advises huge pages for arrays of 4 MiB and up

    large = [s for s in sizes if 4 * s >= 16 << 10]

    def arrays(huge):
        multiarray._set_madvise_hugepage(huge)
        whole, out = np.ones(sum(sizes), np.float32), np.ones(sum(sizes), np.float32)
        base = np.ones(sum(large) + 16 * len(large), np.float32)
        at = np.cumsum([0] + [n + 16 for n in large])  # 64-byte gaps between the pieces
        return whole, out, [base[a : a + n] for a, n in zip(at, large)]

    made = {huge: arrays(huge) for huge in (True, False)}
    multiarray._set_madvise_hugepage(True)
    runs = {}
    for huge, (whole, out, pieces) in made.items():
        tag = "huge" if huge else "4k"
        runs[f"whole_{tag}"] = lambda w=whole, o=out, t=tag: hvd.allreduce(
            w, op=hvd.Sum, name=f"pw{t}", out=o
        )
        runs[f"large_{tag}"] = lambda p=pieces, t=tag: hvd.grouped_allreduce(
            p, op=hvd.Sum, name=f"pl{t}"
        )
    print_interleaved_medians(runs)


def model_sizes(name):
    """The element counts of the model's trainable variables: from Keras where it is installed
    (and kept in model_sizes/NAME.txt), else from that file (a GPU machine without TensorFlow)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_sizes", f"{name}.txt")
    try:
        import keras
    except ImportError:
        with open(path) as f:
            return [int(line) for line in f if line.strip()]
    net = getattr(keras.applications, name)(weights=None, input_shape=(32, 32, 3), classes=1000)
    sizes = [int(np.prod(v.shape)) for v in net.trainable_variables]
    if hvd.rank() == 0 and not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("".join(f"{s}\n" for s in sizes))
    return sizes


def model(name):
    sizes = model_sizes(name)
    parts = [np.ones(s, np.float32) for s in sizes]
    whole = np.ones(sum(sizes), np.float32)
    out = np.empty_like(whole)
    outs = [np.empty_like(p) for p in parts]
    names = [f"mo.{i}" for i in range(len(parts))]
    g = median_us(lambda: hvd.grouped_allreduce(parts, op=hvd.Sum, name="m"))
    go = median_us(lambda: grouped_into(names, parts, outs, "mo"))
    w = median_us(lambda: hvd.allreduce(whole, op=hvd.Sum, name="mw", out=out))
    wn = median_us(lambda: hvd.allreduce(whole, op=hvd.Sum, name="mwn"))
    if hvd.rank() == 0:
        small = sum(4 * s < 16 << 10 for s in sizes)
        print(
            f"{name}: {len(sizes)} tensors ({small} under 16 KiB), {4 * sum(sizes) / 2**20:.1f} "
            f"MiB: grouped {g:.0f} us, grouped(out) {go:.0f}, one tensor(out) {w:.0f}, "
            f"one tensor(alloc) {wn:.0f}; grouped / one tensor(out) {g / w:.2f}, "
            f"grouped(out) / one tensor(out) {go / w:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    if "--model" in sys.argv and "--pages" in sys.argv:
        model_pages(model_sizes(sys.argv[sys.argv.index("--model") + 1]))
    elif "--model" in sys.argv and "--layouts" in sys.argv:
        model_layouts(model_sizes(sys.argv[sys.argv.index("--model") + 1]))
    elif "--model" in sys.argv:
        model(sys.argv[sys.argv.index("--model") + 1])
    elif "--outputs" in sys.argv:
        outputs()
    elif "--layouts" in sys.argv:
        layouts()
    else:
        frontend()
    hvd.shutdown()
