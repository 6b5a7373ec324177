"""Adasum against Sum through the engine, in one run:

    mpirun -np 2 --bind-to core python benchmarks/adasum.py      (or -np 4)

For float32 buffers from 64 KiB to 64 MiB it prints the time per op of
horovod.numpy.allreduce(x, op=Sum) (the ring) and of op=Adasum (vector halving, distance
doubling: the same bytes on the wire, plus the dot products, the norms' small exchanges and the
combination in double), and their ratio (> 1: Adasum slower). Each figure is the median of 5
interleaved trials (runner.py).
"""

import numpy as np

import horovod.numpy as hvd

hvd.init()
from runner import KIB, MIB, N, median_times, say, size_label  # noqa: E402

say(f"{N} ranks; float32; median of 5 trials")
say(f"{'size':>8} {'sum ms':>9} {'adasum ms':>10} {'adasum/sum':>11}")
for nbytes in (64 * KIB, 1 * MIB, 16 * MIB, 64 * MIB):
    x = np.random.default_rng(hvd.rank()).standard_normal(nbytes // 4).astype(np.float32)
    y = np.empty_like(x)
    iters = max(2, min(200, (64 * MIB) // nbytes))

    def ring(x=x, y=y, nbytes=nbytes):
        hvd.allreduce(x, op=hvd.Sum, name=f"sum{nbytes}", out=y)

    def adasum(x=x, y=y, nbytes=nbytes):
        hvd.allreduce(x, op=hvd.Adasum, name=f"adasum{nbytes}", out=y)

    t_sum, t_ada = median_times([ring, adasum], iters)
    say(f"{size_label(nbytes):>8} {t_sum * 1e3:9.3f} {t_ada * 1e3:10.3f} {t_ada / t_sum:11.2f}")
