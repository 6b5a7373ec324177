"""Gradient compression around a collective: Compression.none, Compression.fp16."""

import tensorflow as tf

from horovod.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Floating tensors travel as float16 (half the bytes); others are untouched."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx is not None else tensor


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
