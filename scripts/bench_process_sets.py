"""Process sets running at once: `mpirun -np 4 python scripts/bench_process_sets.py` splits
the ranks into two sets of 2 and prints, for each set, its 16 MiB float32 allreduce bus
bandwidth while the other set is idle and while both run (docs/benchmarks.md). With 2 ranks a
set's bus bandwidth is size/time. On one machine the two sets share its cores and memory
bandwidth, so "alone" is the peer figure the concurrent one is compared with."""

import time

import numpy as np

import horovod.numpy as hvd


def main():
    hvd.init()
    me, n = hvd.rank(), hvd.size()
    assert n == 4, "run on 4 ranks"
    sets = [hvd.add_process_set([0, 1]), hvd.add_process_set([2, 3])]
    mine = sets[me // 2]
    x = np.ones(4 << 20, np.float32)  # 16 MiB

    def timed(active):
        reps = 20
        hvd.allreduce(np.ones(1), name="bw/barrier")
        if me // 2 not in active:
            hvd.allreduce(np.ones(1), name="bw/barrier2")
            return None
        for _ in range(3):
            hvd.allreduce(x, op=hvd.Sum, name="bw/x", process_set=mine)
        t0 = time.perf_counter()
        for _ in range(reps):
            hvd.allreduce(x, op=hvd.Sum, name="bw/x", process_set=mine)
        dt = (time.perf_counter() - t0) / reps
        hvd.allreduce(np.ones(1), name="bw/barrier2")
        return x.nbytes / dt / 1e9  # 2 ranks: bus bandwidth = 2(n-1)/n * size/t = size/t

    alone = [timed({0}), timed({1})]
    both = timed({0, 1})
    mine_alone = alone[me // 2]
    if mine.rank() == 0:
        print(
            f"set {mine.ranks}: 16 MiB allreduce busbw alone {mine_alone:.2f} GB/s, "
            f"while the other set runs {both:.2f} GB/s (ratio {both / mine_alone:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
