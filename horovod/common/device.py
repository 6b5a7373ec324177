"""Device arrays for the framework-neutral frontends: any object in CUDA memory that exposes
`__cuda_array_interface__` (CuPy, Numba, PyTorch) or `__dlpack__` / `__dlpack_device__` on a
CUDA device (PyTorch, CuPy, JAX). `horovod.numpy`'s ops take them as they take NumPy arrays;
this module reads the pointer, shape, dtype, device and the producer's stream, which the engine
uses as the TF kernels' (it orders its NCCL work after that stream), and turns the engine's
outputs back into the input's kind. A PyTorch frontend can stand on the same calls.

Outputs of allreduce and broadcast are allocated by the input's own library
(`<library>.empty_like`, the library found from the type's module); those whose size is known
only after negotiation (allgather, alltoall, reducescatter) are device memory the engine
allocates, handed back through DLPack (`<library>.from_dlpack`).
"""

import importlib

import numpy as np

from horovod.common import basics as _b
from horovod.common import engine_types as _types
from horovod.common.exceptions import MixedDevicesError

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICE_NAMES = {
    1: "CPU",
    2: "CUDA",
    3: "CUDAHost",
    4: "OpenCL",
    7: "Vulkan",
    8: "Metal",
    9: "VPI",
    10: "ROCM",
    11: "ROCMHost",
    13: "CUDAManaged",
    14: "OneAPI",
}
# The engine's DataType values (declared in csrc/common/common.h, read from the engine).
_DT = _types.DATA_TYPE_VALUES
UINT8, INT8, UINT16, INT16 = _DT["uint8"], _DT["int8"], _DT["uint16"], _DT["int16"]
INT32, INT64, BOOL = _DT["int32"], _DT["int64"], _DT["bool"]
FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = (
    _DT["float16"],
    _DT["bfloat16"],
    _DT["float32"],
    _DT["float64"],
)
_BY_KIND = {
    ("u", 1): UINT8,
    ("i", 1): INT8,
    ("u", 2): UINT16,
    ("i", 2): INT16,
    ("i", 4): INT32,
    ("i", 8): INT64,
    ("f", 2): FLOAT16,
    ("f", 4): FLOAT32,
    ("f", 8): FLOAT64,
    ("b", 1): BOOL,
}
# DLPack (code, bits) -> engine dtype; codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
_BY_DL = {
    (1, 8): UINT8,
    (0, 8): INT8,
    (1, 16): UINT16,
    (0, 16): INT16,
    (0, 32): INT32,
    (0, 64): INT64,
    (2, 16): FLOAT16,
    (4, 16): BFLOAT16,
    (2, 32): FLOAT32,
    (2, 64): FLOAT64,
    (6, 8): BOOL,
}
_SIZES = {UINT8: 1, INT8: 1, BOOL: 1, UINT16: 2, INT16: 2, FLOAT16: 2, BFLOAT16: 2}
_SUPPORTED = _types._core.supported_data_types()  # the engine's words, as NumPy's binding says


def _cai(obj):
    """obj's __cuda_array_interface__ dict, or None (a CPU torch tensor raises on the read)."""
    try:
        d = obj.__cuda_array_interface__
    except Exception:  # noqa: BLE001  (any failure: not a CUDA array)
        return None
    return d if isinstance(d, dict) else None


def _dl_device(obj):
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    try:
        dev = fn()
        return int(dev[0]), int(dev[1])
    except Exception:  # noqa: BLE001
        return None


# What describe() learnt of a type, kept per type (its module and protocols do not change):
# its library, and whether it is read through DLPack although it has a CUDA array interface
# (v2, without the producer's stream: PyTorch's). Each saves Python reads of 1-4 us per array
# and op: the import lookups of library_of, and torch's __cuda_array_interface__ property,
# built and thrown away twice per tensor (is_device_array, then describe) before.
_LIBRARIES = {}
_DLPACK_FIRST = set()


def is_device_array(obj):
    """True for an object in device memory by either protocol (not for host arrays: those go
    the NumPy way; a DLPack device other than CPU counts, so that it is refused by name)."""
    if isinstance(obj, np.ndarray):
        return False
    if type(obj) not in _DLPACK_FIRST and _cai(obj) is not None:
        return True
    dev = _dl_device(obj)
    return dev is not None and dev[0] != KDL_CPU


def library_of(obj):
    """The module that made obj (torch, cupy, ...): of its type's module and that module's
    parents, outermost first, the first that has from_dlpack or empty_like; None if none."""
    kind = type(obj)
    try:
        return _LIBRARIES[kind]
    except KeyError:
        pass
    _LIBRARIES[kind] = lib = _find_library(kind.__module__)
    return lib


def _find_library(module):
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        try:
            mod = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            return None
        if hasattr(mod, "from_dlpack") or hasattr(mod, "empty_like"):
            return mod
    return None


class DeviceTensor:
    """What the engine needs of a device array: pointer, shape, engine dtype, device (-1: the
    engine reads it from the pointer) and the producer's stream (a cudaStream_t as an int: 0
    the legacy default stream, 1 cudaStreamLegacy, 2 cudaStreamPerThread, else a handle)."""

    __slots__ = ("obj", "owner", "ptr", "shape", "dtype", "device", "stream", "library")

    @property
    def ndim(self):
        return len(self.shape)

    def entry(self):
        return (self.owner, self.ptr, list(self.shape), self.dtype, self.device, self.stream)


def _contiguous(name, shape, strides, itemsize, unit):
    """Refuses strides that are not C-contiguous (dimensions of one element may have any)."""
    if strides is None:
        return
    want = itemsize if unit == "bytes" else 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            raise ValueError(
                f"tensor '{name}': device array is not C-contiguous (shape {list(shape)}, "
                f"strides {list(strides)} in {unit}); pass a contiguous copy "
                "(cupy.ascontiguousarray(x), x.contiguous())"
            )
        want *= n


def _device_id(obj):
    dev = getattr(obj, "device", None)
    for attr in ("id", "index"):  # cupy.cuda.Device.id, torch.device.index
        v = getattr(dev, attr, None)
        if isinstance(v, int):
            return v
    dl = _dl_device(obj)
    return dl[1] if dl is not None and dl[0] == KDL_CUDA else -1


def describe(name, obj):
    """The DeviceTensor of obj; ValueError/TypeError naming the tensor if it cannot be used.
    Whatever a producer's protocol raises or leaves out becomes a ValueError naming the tensor:
    the submission turns those two into a refusal on every rank, anything else would leave the
    other ranks waiting for the op."""
    try:
        return _describe(name, obj)
    except (TypeError, ValueError):
        raise
    except KeyError as e:
        raise ValueError(
            f"tensor '{name}': the __cuda_array_interface__ of {type(obj).__name__} has no "
            f"{e.args[0]!r} entry (CUDA Array Interface: 'shape', 'typestr' and 'data' are "
            "required)"
        ) from None
    except Exception as e:  # noqa: BLE001  (a producer's own failure, reported as it raised it)
        raise ValueError(
            f"tensor '{name}': reading the device array {type(obj).__name__} failed: "
            f"{type(e).__name__}: {e}"
        ) from None


def _describe(name, obj):
    t = DeviceTensor()
    t.obj, t.library = obj, library_of(obj)
    if type(obj) not in _DLPACK_FIRST:
        cai = _cai(obj)
        # CUDA Array Interface v3 carries the producer's stream; without it (v2, e.g.
        # PyTorch's) DLPack's exchange orders the producer's work instead, when the object has it.
        if cai is not None and ("stream" in cai or not hasattr(obj, "__dlpack__")):
            return _from_cai(name, t, obj, cai)
        if cai is not None:
            _DLPACK_FIRST.add(type(obj))
    dev = _dl_device(obj)
    if dev is None:
        raise TypeError(f"tensor '{name}': {type(obj).__name__} is not an array NumPy reads")
    if dev[0] != KDL_CUDA:
        what = _DL_DEVICE_NAMES.get(dev[0], f"DLPack device type {dev[0]}")
        raise ValueError(
            f"tensor '{name}' is on a {what} device; Horovod takes CUDA device arrays "
            "(DLPack kDLCUDA) or host arrays"
        )
    return _from_dlpack(name, t, obj, dev)


def _from_cai(name, t, obj, cai):
    if cai.get("mask") is not None:
        raise ValueError(f"tensor '{name}': masked device arrays are not supported")
    try:
        dt = np.dtype(cai["typestr"])
    except TypeError:
        dt = None
    code = _BY_KIND.get((dt.kind, dt.itemsize)) if dt is not None else None
    if code is None or not dt.isnative:
        raise TypeError(
            f"tensor '{name}': device dtype {cai['typestr']!r} is not supported; use {_SUPPORTED}"
        )
    t.shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    _contiguous(name, t.shape, strides, dt.itemsize, "bytes")
    t.ptr = int(cai["data"][0] or 0)
    t.dtype = code
    t.device = _device_id(obj)
    # v3: None means no synchronization is needed; 0 (the legacy default stream) is then safe.
    stream = cai.get("stream")
    t.stream = int(stream) if stream is not None else 0
    t.owner = obj
    return t


def _from_dlpack(name, t, obj, dev):
    # stream=1: the producer makes its work visible on the legacy default stream, which the
    # engine then orders after (DLPack's consumer-stream exchange).
    try:
        cap = obj.__dlpack__(stream=1)
    except TypeError:
        cap = obj.__dlpack__()
    except Exception as e:  # noqa: BLE001  (named here: describe() words the others)
        raise ValueError(
            f"tensor '{name}': {type(obj).__name__}.__dlpack__() raised {type(e).__name__}: {e}"
        ) from None
    ptr, shape, strides, (code, bits, lanes), _ = _b._lib().dlpack_describe(cap)
    dtype = _BY_DL.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise TypeError(
            f"tensor '{name}': DLPack dtype (code {code}, {bits} bits, {lanes} lanes) is not "
            f"supported; use {_SUPPORTED}"
        )
    t.shape = tuple(shape)
    _contiguous(name, t.shape, strides, 0, "elements")
    t.ptr, t.dtype, t.device, t.stream = ptr, dtype, dev[1], 1
    t.owner = (obj, cap)  # the capsule, unconsumed, keeps the producer's memory alive
    return t


def output_for(name, t, out):
    """The (owner, pointer) of the output of a same-shape op (allreduce, broadcast): `out` if
    given (a device array of the input's dtype and size), else the input library's empty_like;
    None: the engine allocates it."""
    if out is None:
        make = getattr(t.library, "empty_like", None)
        if make is None:
            return None
        try:
            out = make(t.obj)
        except Exception:  # noqa: BLE001  (a library refusing: the engine allocates instead)
            return None
    elif not is_device_array(out):
        raise MixedDevicesError(f"tensor '{name}': out must be a device array like the input")
    o = describe(name, out)
    if o.dtype != t.dtype or o.shape != t.shape:
        raise ValueError(f"tensor '{name}': out must have the input's dtype and shape")
    # The array itself, not a DLPack capsule of it: it is what the op returns, and it keeps
    # its memory alive.
    return (o.obj, o.ptr)


class _Exported:
    """An engine-allocated device output, for one <library>.from_dlpack (or the caller's)."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule, device):
        self._capsule, self._device = capsule, device

    def __dlpack_device__(self):
        return (KDL_CUDA, self._device)

    def __dlpack__(self, stream=None, **kwargs):
        # Complete when the op's wait returned (the engine waits for its stream): no stream
        # ordering is needed. max_version etc. are accepted; the capsule is the unversioned one.
        cap, self._capsule = self._capsule, None
        if cap is None:
            raise BufferError("this Horovod output was already exported")
        return cap


def result(t, out):
    """The op's output as the input's kind: a preallocated output as it is, an engine-allocated
    one (a DLPack capsule) through the input library's from_dlpack."""
    if not (type(out).__name__ == "PyCapsule"):
        return out
    device = t.device if t.device >= 0 else 0
    exported = _Exported(out, device)
    convert = getattr(t.library, "from_dlpack", None)
    return convert(exported) if convert is not None else exported
