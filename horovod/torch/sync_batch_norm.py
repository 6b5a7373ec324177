"""SyncBatchNorm: batch normalization over every rank's batch at once, on CPU and GPU tensors.

Each rank sums its rows and their squares per channel and counts them; one allreduce (float64)
gives the global count, mean and variance, exact for batches of unequal sizes. The allreduce is
differentiable (its gradient is the same sum of the incoming gradients), so autograd derives
the exact gradient of the global statistics with no hand-written backward. As torch's BatchNorm,
the output has the input's dtype (float16/bfloat16 too) and the running statistics keep the
module's own dtype."""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from horovod.common.engine_types import Sum
from horovod.common.process_sets import global_process_set
from horovod.common.process_sets import set_size as _set_size
from horovod.torch import mpi_ops


class SyncBatchNorm(_BatchNorm):
    """torch.nn.BatchNorm*d (any input of shape (N, C, ...)) with statistics over every rank
    of `process_set`; upstream's arguments. In eval mode it uses the running statistics, which
    are the same on every rank (updated from the global ones)."""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        process_set=global_process_set,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        batch_stats = self.training or not self.track_running_stats
        if not batch_stats or _set_size(self.process_set) == 1:
            return super().forward(input)  # BatchNorm's own: running stats, or one rank
        c = input.size(1)
        dims = [0] + list(range(2, input.dim()))
        x = input.double()
        count = torch.tensor([input.numel() // c], dtype=torch.float64, device=input.device)
        local = torch.cat([x.sum(dims), (x * x).sum(dims), count])
        total = mpi_ops.allreduce(local, op=Sum, process_set=self.process_set)
        n = total[2 * c]
        mean = total[:c] / n
        var = (total[c : 2 * c] / n - mean * mean).clamp_min(0)
        if self.training and self.track_running_stats:
            self._update_running(mean.detach(), var.detach(), n.item())
        shape = [1, c] + [1] * (input.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.double().view(shape) + self.bias.double().view(shape)
        # Cast last, as torch's BatchNorm: a float16/bfloat16 input (with float32 or 16-bit
        # parameters) comes out in its own dtype, not promoted by the parameters' dtype.
        return y.to(input.dtype)

    def _update_running(self, mean, var, n):
        self.num_batches_tracked.add_(1)
        factor = (
            self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        )
        unbiased = var * (n / max(n - 1.0, 1.0))
        with torch.no_grad():
            # In float64, rounded once into the buffers' own dtype (a 16-bit buffer stays so).
            for buf, new in ((self.running_mean, mean), (self.running_var, unbiased)):
                buf.copy_(buf.double() * (1 - factor) + new * factor)
