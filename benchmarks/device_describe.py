"""The frontend's own cost per device array and op, no GPU needed: what a submission does for
one device input (horovod.common.device.is_device_array, then describe), timed on the CPU
stand-ins of tests/support/fakelib: a CuPy-like array (CUDA array interface v3) and a
torch-like tensor (DLPack, plus a CUDA array interface v2 built in Python on every read, as
torch's). The stand-ins' own protocol reads cost what they cost, not what CuPy's or torch's do:
compare a tree with another tree (e.g. a git worktree of the commit before), not with a GPU.

    PYTHONPATH=$PWD python benchmarks/device_describe.py [LABEL]
"""

import sys
import timeit

import numpy as np

from horovod.common import device
from tests.support import fakelib


class TorchV2Like(fakelib.TorchLike):
    """DLPack, and a CUDA array interface v2 (no stream) built on every read, as torch's."""

    @property
    def __cuda_array_interface__(self):
        h = self._host
        return {
            "typestr": h.dtype.str,
            "shape": tuple(h.shape),
            "strides": None,
            "data": (h.ctypes.data, False),
            "version": 2,
        }


def one_input(x):
    device.is_device_array(x)
    device.describe("x", x)


def main():
    label = sys.argv[1] if len(sys.argv) > 1 else "this tree"
    n = 20000
    cases = [
        ("cupy-like (CAI v3)", fakelib.CupyLike(np.ones(1024, np.float32))),
        ("torch-like (DLPack + CAI v2)", TorchV2Like(np.ones(1024, np.float32))),
    ]
    for name, x in cases:
        runs = sorted(timeit.repeat(lambda x=x: one_input(x), number=n, repeat=5))
        print(f"{label}: {name}: {runs[2] / n * 1e6:.2f} us per input (median of 5 x {n})")


if __name__ == "__main__":
    main()
