"""Stand-ins for CuPy arrays and PyTorch CUDA tensors on a machine without a GPU: plain classes
exposing the device protocols over a host buffer's address while claiming CUDA device 0. The
frontend reads them as it reads the real ones; the engine then refuses them ("no GPU support"
in a CPU build, "no GPU visible" in a GPU build), which is all that can run here. This module
is also their "library" (horovod.common.device.library_of): empty_like and from_dlpack.
"""

import ctypes

import numpy as np

_KEEP = []  # host buffers and DLPack structs the fakes hand out: alive for the process


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


class _Fake:
    def __init__(self, host, device_type=2, strides=None):
        self._host = np.ascontiguousarray(host) if strides is None else host
        self._device_type, self._strides = device_type, strides
        _KEEP.append(self._host)

    @property
    def shape(self):
        return self._host.shape

    @property
    def dtype(self):
        return self._host.dtype


class CupyLike(_Fake):
    """__cuda_array_interface__ v3, with the producer's stream (CuPy's form)."""

    class device:  # noqa: N801  (cupy.cuda.Device-like: .id)
        id = 0

    @property
    def __cuda_array_interface__(self):
        return {
            "data": (self._host.ctypes.data, False),
            "shape": self._host.shape,
            "typestr": self._host.dtype.str,
            "strides": self._strides,
            "version": 3,
            "stream": 1,
        }


class TorchLike(_Fake):
    """__dlpack__ / __dlpack_device__ on kDLCUDA (PyTorch's form; its CUDA array interface is
    v2, without a stream, so the frontend takes DLPack)."""

    def __dlpack_device__(self):
        return (self._device_type, 0)

    def __dlpack__(self, stream=None, **kwargs):
        h = self._host
        shape = (ctypes.c_int64 * max(h.ndim, 1))(*h.shape)
        strides = None
        if self._strides is not None:
            strides = (ctypes.c_int64 * max(h.ndim, 1))(*self._strides)
        m = _DLManagedTensor()
        t = m.dl_tensor
        t.data = h.ctypes.data
        t.device = _DLDevice(self._device_type, 0)
        t.ndim = h.ndim
        t.dtype = _DLDataType(_DL_CODES[h.dtype.kind], h.dtype.itemsize * 8, 1)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        if strides is not None:
            t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        _KEEP.extend([shape, strides, m])
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)


def empty_like(x):
    return type(x)(np.empty_like(x._host))


def from_dlpack(x):  # never reached here: the engine refuses first
    raise AssertionError("a fake device array cannot be imported")
