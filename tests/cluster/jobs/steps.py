"""A long job for fault tests: allreduces of 4 MiB for --seconds, printing `step N` on rank 0 so
a test knows the job is running."""

import argparse
import sys
import time

import numpy as np

import horovod.numpy as hvd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=120)
    args = p.parse_args()
    hvd.init()
    x = np.ones(1 << 20, np.float32)
    end = time.monotonic() + args.seconds
    step = 0
    while time.monotonic() < end:
        hvd.allreduce(x, op=hvd.Sum, name="steps.grad")
        step += 1
        if hvd.rank() == 0 and step % 10 == 1:
            print(f"step {step}", flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
