"""A/B of test_ranks_leave_the_core_while_the_link_carries_their_data's job by hand, on the same
shaped cluster (3 workers at 400mbit, worker 3 at 200mbit), 2 x 1, launches alternating:

    IMAGE_TAG=0.1.0-cpu python benchmarks/ab_shaped_2x1.py MSG:STAGGER:OUT[,...] ROUNDS

Each variant: one 64 MiB allreduce, then 3 timed; the slower rank's time per op is kept and
each variant's median printed. OUT=1 reuses the output (out=y), 0 allocates a fresh one per op.
MSG and STAGGER went to temporary engine knobs (HVD_EXP_GATHER_MSG: the ring allgather's
message cap; HVD_EXP_STAGGER=1: a segment's first message half size) that were never
committed: the committed engine ignores them (8 MiB, no stagger). NMH=0 in the environment passes
NUMPY_MADVISE_HUGEPAGE=0 to the ranks."""

import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.compose import make_cluster  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402

OPS = 3
JOB = (
    "python -c 'import resource, time, numpy as np, horovod.numpy as hvd; hvd.init(); "
    "x = np.ones(16 << 20, np.float32); y = np.empty_like(x); "
    'hvd.allreduce(x, op=hvd.Sum, name="w"); '
    "t0 = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF); "
    f'[hvd.allreduce(x, op=hvd.Sum, name="w"OUT) for _ in range({OPS})]; '
    "r1 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter() - t0; "
    "cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime; "
    f'print(f"rank {{hvd.rank()}}: {{t / {OPS}:.3f}} s per 64 MiB allreduce, '
    "{cpu / t:.2f} of a core\")'"
)


def main():
    variants = [tuple(v.split(":")) for v in sys.argv[1].split(",")]
    rounds = int(sys.argv[2])
    nmh = os.environ.get("NMH", "1")
    c = make_cluster(
        3,
        extra_files=[str(ROOT / "compose" / "compose.shaped.yaml")],
        env={"HOROVOD_LINK_RATE": "400mbit", "HOROVOD_LINK_RATES": "3=200mbit"},
    )
    times = {v: [] for v in variants}
    try:
        for r in range(rounds):
            for msg, stagger, out in variants:
                env = f"-x HVD_EXP_GATHER_MSG={msg} -x HVD_EXP_STAGGER={stagger}"
                env += f" -x NUMPY_MADVISE_HUGEPAGE={nmh}"
                job = JOB.replace("OUT", ", out=y" if out == "1" else "")
                hosts = f"{c.worker(1)}:1,{c.worker(2)}:1"
                stdout, _ = c.run_ok(
                    f'horovodrun -np 2 --mpi-args="{env}" -H {hosts} {job}', timeout=180
                )
                got = re.findall(
                    r"^rank \d: ([0-9.]+) s per 64 MiB allreduce, ([0-9.]+) of a core$",
                    stdout,
                    re.M,
                )
                worst = max(float(s) for s, _ in got)
                times[(msg, stagger, out)].append(worst)
                label = f"msg {int(msg) >> 20} MiB stagger {stagger} out {out}"
                print(
                    f"round {r} {label}: {worst:.3f} s, cpu {[core for _, core in got]}", flush=True
                )
    finally:
        c.down()
    for (msg, stagger, out), v in times.items():
        v = sorted(v)
        m = v[len(v) // 2]
        print(
            f"msg {int(msg) >> 20} MiB stagger {stagger} out {out}: median {m:.3f} min {v[0]:.3f} "
            f"max {v[-1]:.3f} (of {len(v)}; {1.342 / m:.2f} of the rate)"
        )


if __name__ == "__main__":
    main()
