"""torch's adapter of the one reference (tests/support/reference.py): its dtypes, inputs as
tensors, the check of a result tensor."""

import numpy as np
import torch

from tests.support import reference as core

# Every reduce dtype but uint16, which torch's CPU kernels barely cover (no sum, min or max).
DTYPES = [getattr(torch, name) for name in core.REDUCE_DTYPES if name != "uint16"]


def make(rank, shape, dt, op="sum", salt=0):
    """(tensor, its exact values as float64) of `rank` (core.values)."""
    t = torch.from_numpy(np.asarray(core.values(rank, shape, dt, op, salt))).to(dt)
    return t, t.double().numpy()


def check(got, want, dt, what):
    """A result tensor: of dtype dt, and core.assert_close to want."""
    assert isinstance(got, torch.Tensor), f"{what}: got {type(got).__name__}"
    assert got.dtype == dt, f"{what}: dtype {got.dtype} != {dt}"
    core.assert_close(got.double().numpy(), want, dt, what)
