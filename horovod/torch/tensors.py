"""torch tensors to and from the engine: a CPU tensor crosses as a NumPy view of its own memory
(no copy), a CUDA tensor as itself (horovod/common/device.py reads its pointer and torch's
current stream); results come back as torch tensors."""

import numpy as np
import torch

from horovod.common.engine_types import BFLOAT16_BITS, is_bfloat16_bits


def _host(tensor):
    """A CPU tensor as a NumPy view of its memory."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
    t = tensor.detach()
    if t.dtype == torch.bfloat16:  # NumPy has none: its bits, tagged (engine_types.py)
        return t.view(torch.int16).numpy().view(BFLOAT16_BITS)
    try:
        return t.resolve_conj().resolve_neg().numpy()
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"a {t.dtype} tensor on {t.device} cannot be handed over ({e})") from None


# CPU tensors of these dtypes cross as plain NumPy views, which the submission layer takes
# without its per-tensor checks (horovod/common/handles.py, plain): a gradient hook's submission
# costs about a third less. Other tensors take the general path, which names what it refuses.
_PLAIN = {
    torch.float16,
    torch.float32,
    torch.float64,
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
}


def plain_view(tensor):
    """A CPU tensor of a plain dtype as a NumPy view of its memory; else None."""
    if (
        isinstance(tensor, torch.Tensor)
        and tensor.device.type == "cpu"
        and tensor.dtype in _PLAIN
        and not tensor.is_conj()
        and not tensor.is_neg()
    ):
        return tensor.detach().numpy()
    return None


def _wrap(a):
    """An engine result as a tensor (device results already are the input's kind)."""
    if isinstance(a, torch.Tensor):
        return a
    if is_bfloat16_bits(a.dtype):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _dt(tensor):
    """`tensor` without autograd, for the engine: the same memory (DLPack refuses a tensor
    that requires grad)."""
    return tensor.detach() if isinstance(tensor, torch.Tensor) else tensor


IO = {"host": _host, "wrap": _wrap}


def like_splits(received, splits):
    """alltoall's received splits (int64, on the CPU) on the device and in the dtype of the
    `splits` tensor given, as upstream returns them (on the GPU for GPU splits)."""
    return received.to(device=splits.device, dtype=splits.dtype)


def eager_only(fn):
    """`fn` always runs eagerly: called while torch.compile traces, it breaks the graph and runs
    as a plain call, as upstream's C calls do, instead of being traced (its handles, NumPy
    views and pickles cannot be; tracing them failed inside Dynamo, on some ranks only). An
    eager call costs about 0.5 us more (a wrapper that checked is_compiling() first cost 0.2
    us, but Dynamo then compiled the wrapper's own frame once per distinct argument)."""
    return torch.compiler.disable(fn, recursive=True)
