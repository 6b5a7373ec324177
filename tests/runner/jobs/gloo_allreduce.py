"""A job for `horovodrun --gloo` tests (tests/runner/test_gloo_launch.py): horovod.numpy over the
TCP transport. Each rank allreduces (Sum) [rank, rank + 1, rank + 2] and prints one RESULT line
(its rank, size, local and cross rank/size and the sum) on stdout and one ERR line on stderr.
With --fail-rank R, rank R then exits with --exit-code and the others wait for the launcher to
stop them. Arguments it does not know (a test's marker) are ignored."""

import argparse
import sys
import time

import numpy as np

import horovod.numpy as hvd

p = argparse.ArgumentParser()
p.add_argument("--fail-rank", type=int)
p.add_argument("--exit-code", type=int, default=3)
args, _ = p.parse_known_args()

hvd.init()
r = hvd.rank()
total = hvd.allreduce(np.arange(3, dtype=np.float64) + r, op=hvd.Sum, name="gloo.sum")
print(
    f"RESULT rank={r} size={hvd.size()} local={hvd.local_rank()}/{hvd.local_size()} "
    f"cross={hvd.cross_rank()}/{hvd.cross_size()} sum={','.join(str(int(v)) for v in total)}",
    flush=True,
)
print(f"ERR rank={r}", file=sys.stderr, flush=True)
if args.fail_rank is not None:
    if r == args.fail_rank:
        sys.exit(args.exit_code)
    time.sleep(600)  # horovodrun must stop this rank
hvd.shutdown()
