"""Process sets running at once: `mpirun -np 4 python benchmarks/process_sets.py` splits
the ranks into two sets of 2 and prints, for each set, its 16 MiB float32 allreduce bus
bandwidth while the other set is idle and while both run (docs/benchmarks.md), through the
engine (`hvd.allreduce(..., process_set=...)`) and, as the peer, through `MPI_Allreduce` (mpi4py)
on a communicator of the same two ranks, measured the same way in the same run. With 2 ranks a
set's bus bandwidth is size/time. On one machine the two sets share its cores and memory
bandwidth, so the concurrent figure is compared with "alone" and with MPI's own."""

import time

import numpy as np
from mpi4py import MPI

import horovod.numpy as hvd

REPS = 20


def main():
    hvd.init()
    me, n = hvd.rank(), hvd.size()
    assert n == 4, "run on 4 ranks"
    sets = [hvd.add_process_set([0, 1]), hvd.add_process_set([2, 3])]
    mine = sets[me // 2]
    comm = MPI.COMM_WORLD.Split(me // 2, me)  # the peer: MPI on the same two ranks
    x = np.ones(4 << 20, np.float32)  # 16 MiB
    out = np.empty_like(x)

    def engine():
        hvd.allreduce(x, op=hvd.Sum, name="bw/x", process_set=mine)

    def mpi():
        comm.Allreduce(x, out, op=MPI.SUM)

    def timed(fn, active):
        hvd.allreduce(np.ones(1), name="bw/barrier")  # every rank starts together
        gbps = None
        if me // 2 in active:
            for _ in range(3):
                fn()
            t0 = time.perf_counter()
            for _ in range(REPS):
                fn()
            gbps = x.nbytes / ((time.perf_counter() - t0) / REPS) / 1e9
        hvd.allreduce(np.ones(1), name="bw/barrier2")
        return gbps

    rows = {}
    for what, fn in (("engine", engine), ("MPI_Allreduce", mpi)):
        alone = [timed(fn, {0}), timed(fn, {1})][me // 2]
        both = timed(fn, {0, 1})
        rows[what] = (alone, both)
    if mine.rank() == 0:
        (ea, eb), (ma, mb) = rows["engine"], rows["MPI_Allreduce"]
        print(
            f"set {mine.ranks}: 16 MiB busbw GB/s | engine alone {ea:.2f}, both sets {eb:.2f} "
            f"(x{eb / ea:.2f}) | MPI_Allreduce alone {ma:.2f}, both sets {mb:.2f} (x{mb / ma:.2f}) "
            f"| engine/MPI alone {ea / ma:.2f}, both sets {eb / mb:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
