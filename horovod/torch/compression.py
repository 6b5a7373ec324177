"""Gradient compression for the allreduce (upstream's hvd.Compression): cast floating tensors to
a 16-bit type on the way out and back on the way in. bf16 keeps float32's range (no scaling
needed), fp16 its precision."""

import torch

from horovod.common.compression import Compressor, NoneCompressor


class _CastCompressor(Compressor):
    wire = None

    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != cls.wire:
            return tensor.to(cls.wire), tensor.dtype
        return tensor, None

    @classmethod
    def decompress(cls, tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class FP16Compressor(_CastCompressor):
    wire = torch.float16


class BF16Compressor(_CastCompressor):
    wire = torch.bfloat16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
