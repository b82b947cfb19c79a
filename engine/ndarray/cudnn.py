"""2-D convolutions of GPU (cupy) arrays through cuDNN's C API, called with ctypes.

cupy 14 dropped its cuDNN bindings. Without them the engine's GPU convolution is im2col: a
copy of every input window, one cuBLAS product and a strided add per kernel position in
the backward (on an H100, a CIFAR ResNet-18 step took 2.8x PyTorch's time and 4.9x its
memory). cuDNN is the library made for this, so the engine calls it directly: NVIDIA's
wheel (``nvidia-cudnn-cu12`` / ``-cu13``, in the ``gpu`` extras) or a system libcudnn.

Numerics: float32 runs in FMA math (no TF32), and only the algorithms that compute each
output as a plain sum of products (implicit/explicit GEMM, cuDNN's ALGO_0/1/3) are used,
so a result differs from the CPU engine's by float32 summation order alone; Winograd and
FFT variants, which trade accuracy for speed, are left out. Among those the heuristics
rank first, a deterministic one is preferred. Where the library cannot be loaded, a
geometry is refused, ``cudnn_off=True`` is passed (as in MXNet) or ``RUDDER_CUDNN=0`` is
set, the caller keeps im2col.

Each (device, shapes, geometry, dtype, layout, workspace limit) gets one :class:`Plan`:
descriptors and the chosen algorithms with their workspace sizes, made once and kept. The
limit is the op's ``workspace`` in MB (MXNet's argument, 1024 by default), capped by
``RUDDER_CUDNN_WORKSPACE_MB`` where set.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
import threading
from dataclasses import dataclass
from typing import Any

from ..backend import cupy

_SUCCESS = 0
_NCHW, _NHWC = 0, 1
_CROSS_CORRELATION = 1  # MXNet's (and every framework's) "convolution"
_FMA_MATH = 3
_DETERMINISTIC = 1
_DATA_TYPES = {"float32": 0, "float64": 1, "float16": 2}
_FORWARD_ALGOS = frozenset({0, 1, 2})  # IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM
_BACKWARD_DATA_ALGOS = frozenset({0, 1})
_BACKWARD_FILTER_ALGOS = frozenset({0, 1, 3})
_DEFAULT_WORKSPACE_MB = 1024  # MXNet's Convolution(workspace=1024): MB of scratch allowed
_MAX_ELEMENTS = 2**31 - 1  # 4-D descriptors take int dimensions and strides
_LIBRARY_NAMES = ("libcudnn.so.9", "libcudnn.so.8")
# cuDNN 9's libcudnn is a shim that opens these by name at first use
_SUBLIBRARIES = ("graph", "engines_precompiled", "engines_runtime_compiled", "heuristic",
                 "ops", "cnn", "adv")


class CudnnError(RuntimeError):
    """A cuDNN call failed; the message names the call and cuDNN's reason."""


class _AlgoPerf(ctypes.Structure):
    """cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (one layout for the three)."""

    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("math_type", ctypes.c_int), ("reserved", ctypes.c_int * 3)]


def _library_dirs() -> list[str]:
    """Where NVIDIA's cuDNN wheel put its libraries (nvidia/cudnn/lib), if installed."""
    try:
        import nvidia.cudnn as wheel  # type: ignore[import-not-found]
    except ImportError:
        return []
    return [os.path.join(base, "lib") for base in getattr(wheel, "__path__", [])]


def _open() -> ctypes.CDLL | None:
    for directory in [*_library_dirs(), None]:
        for name in _LIBRARY_NAMES:
            path = name if directory is None else os.path.join(directory, name)
            if directory is not None and not os.path.exists(path):
                continue
            try:
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            if directory is not None:
                # the shim's dlopen of a sub-library by name finds one already loaded
                for sub in _SUBLIBRARIES:
                    for found in sorted(glob.glob(os.path.join(directory,
                                                               f"libcudnn_{sub}.so*"))):
                        try:
                            ctypes.CDLL(found, mode=ctypes.RTLD_GLOBAL)
                        except OSError:
                            pass
            return lib
    return None


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    out_p, out_i = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)
    out_size, perf = ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_AlgoPerf)
    run = [p, p, p, p, p, p, p, i, p, size, p, p, p]
    signatures = {
        "cudnnCreate": [out_p], "cudnnSetStream": [p, p],
        "cudnnCreateTensorDescriptor": [out_p],
        "cudnnSetTensor4dDescriptor": [p, i, i, i, i, i, i],
        "cudnnCreateFilterDescriptor": [out_p],
        "cudnnSetFilter4dDescriptor": [p, i, i, i, i, i, i],
        "cudnnCreateConvolutionDescriptor": [out_p],
        "cudnnSetConvolution2dDescriptor": [p, i, i, i, i, i, i, i, i],
        "cudnnSetConvolutionMathType": [p, i], "cudnnSetConvolutionGroupCount": [p, i],
        "cudnnGetConvolutionForwardAlgorithm_v7": [p, p, p, p, p, i, out_i, perf],
        "cudnnGetConvolutionBackwardDataAlgorithm_v7": [p, p, p, p, p, i, out_i, perf],
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7": [p, p, p, p, p, i, out_i, perf],
        "cudnnGetConvolutionForwardWorkspaceSize": [p, p, p, p, p, i, out_size],
        "cudnnGetConvolutionBackwardDataWorkspaceSize": [p, p, p, p, p, i, out_size],
        "cudnnGetConvolutionBackwardFilterWorkspaceSize": [p, p, p, p, p, i, out_size],
        "cudnnConvolutionForward": run, "cudnnConvolutionBackwardData": run,
        "cudnnConvolutionBackwardFilter": run,
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    lib.cudnnGetErrorString.argtypes, lib.cudnnGetErrorString.restype = [i], ctypes.c_char_p
    lib.cudnnGetVersion.argtypes, lib.cudnnGetVersion.restype = [], ctypes.c_size_t
    return lib


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_tried = False
_local = threading.local()  # this thread's handle per device
_plans: dict[tuple[Any, ...], Plan | None] = {}
_MAX_PLANS = 512

# alpha = 1, beta = 0 (scaling factors are passed by address: double for float64 data)
_SCALARS = {False: (ctypes.c_float(1.0), ctypes.c_float(0.0)),
            True: (ctypes.c_double(1.0), ctypes.c_double(0.0))}


def library() -> ctypes.CDLL | None:
    """The bound cuDNN library, or None where it cannot be used (no GPU, not installed,
    ``RUDDER_CUDNN=0``)."""
    global _lib, _tried
    if _tried:
        return _lib
    with _lock:
        if not _tried:
            if cupy is not None and os.environ.get("RUDDER_CUDNN", "1") != "0":
                try:
                    opened = _open()
                    _lib = _bind(opened) if opened is not None else None
                except AttributeError:  # a library without the legacy convolution API
                    _lib = None
            _tried = True
    return _lib


def version() -> int | None:
    lib = library()
    return int(lib.cudnnGetVersion()) if lib is not None else None


def _check(status: int, what: str) -> None:
    if status != _SUCCESS:
        assert _lib is not None
        reason = _lib.cudnnGetErrorString(status)
        raise CudnnError(f"{what} failed: {reason.decode() if reason else status}")


def _handle(lib: ctypes.CDLL, device: int) -> int:
    handles = getattr(_local, "handles", None)
    if handles is None:
        handles = _local.handles = {}
    handle = handles.get(device)
    if handle is None:
        created = ctypes.c_void_p()
        with cupy.cuda.Device(device):  # type: ignore[union-attr]
            _check(lib.cudnnCreate(ctypes.byref(created)), "cudnnCreate")
        handle = handles[device] = int(created.value or 0)
    return handle


def _new(lib: ctypes.CDLL, kind: str) -> int:
    created = ctypes.c_void_p()
    _check(getattr(lib, f"cudnnCreate{kind}Descriptor")(ctypes.byref(created)),
           f"cudnnCreate{kind}Descriptor")
    return int(created.value or 0)


def _nchw(shape: tuple[int, ...], last: bool) -> tuple[int, int, int, int]:
    n, a, b, c = shape
    return (n, c, a, b) if last else (n, a, b, c)


@dataclass
class Plan:
    """One convolution geometry on one device: descriptors, algorithms, workspaces."""

    device: int
    x_desc: int
    w_desc: int
    y_desc: int
    conv_desc: int
    y_shape: tuple[int, ...]
    double: bool
    forward_algo: int = 0
    forward_bytes: int = 0
    data_algo: int = 0
    data_bytes: int = 0
    filter_algo: int = 0
    filter_bytes: int = 0

    def _call(self, function: str, first: int, a: Any, second: int, b: Any, algo: int,
              workspace_bytes: int, out_desc: int, out: Any) -> None:
        lib = _lib
        assert lib is not None
        handle = _handle(lib, self.device)
        stream = cupy.cuda.get_current_stream().ptr  # type: ignore[union-attr]
        streams = _local.streams = getattr(_local, "streams", {})
        if streams.get(handle) != stream:  # set once per stream change, not per call
            _check(lib.cudnnSetStream(handle, stream), "cudnnSetStream")
            streams[handle] = stream
        workspace = (cupy.empty(workspace_bytes, dtype=cupy.uint8)  # type: ignore[union-attr]
                     if workspace_bytes else None)
        one, zero = _SCALARS[self.double]
        _check(getattr(lib, function)(
            handle, ctypes.addressof(one), first, a.data.ptr, second, b.data.ptr,
            self.conv_desc, algo, workspace.data.ptr if workspace is not None else None,
            workspace_bytes, ctypes.addressof(zero), out_desc, out.data.ptr), function)

    def forward(self, x: Any, w: Any) -> Any:
        y = cupy.empty(self.y_shape, dtype=x.dtype)  # type: ignore[union-attr]
        self._call("cudnnConvolutionForward", self.x_desc, x, self.w_desc, w,
                   self.forward_algo, self.forward_bytes, self.y_desc, y)
        return y

    def backward_data(self, w: Any, dy: Any, x_shape: tuple[int, ...]) -> Any:
        dx = cupy.empty(x_shape, dtype=dy.dtype)  # type: ignore[union-attr]
        self._call("cudnnConvolutionBackwardData", self.w_desc, w, self.y_desc, dy,
                   self.data_algo, self.data_bytes, self.x_desc, dx)
        return dx

    def backward_filter(self, x: Any, dy: Any, w_shape: tuple[int, ...]) -> Any:
        dw = cupy.empty(w_shape, dtype=dy.dtype)  # type: ignore[union-attr]
        self._call("cudnnConvolutionBackwardFilter", self.x_desc, x, self.y_desc, dy,
                   self.filter_algo, self.filter_bytes, self.w_desc, dw)
        return dw


def workspace_limit(workspace_mb: float | None = None) -> int:
    """Bytes of scratch an algorithm may use: the op's ``workspace`` (MB, as MXNet's
    Convolution takes it), capped by ``RUDDER_CUDNN_WORKSPACE_MB`` where set."""
    limit = float(workspace_mb if workspace_mb is not None else _DEFAULT_WORKSPACE_MB)
    cap = os.environ.get("RUDDER_CUDNN_WORKSPACE_MB")
    if cap:
        limit = min(limit, float(cap))
    return int(max(limit, 0.0) * 2**20)


def _choose(lib: ctypes.CDLL, what: str, allowed: frozenset[int], handle: int,
            descriptors: tuple[int, int, int, int], limit: int) -> tuple[int, int]:
    """(algorithm, workspace bytes): the best-ranked allowed one, deterministic first."""
    perfs = (_AlgoPerf * 16)()
    count = ctypes.c_int(0)
    _check(getattr(lib, f"cudnnGet{what}Algorithm_v7")(handle, *descriptors, 16,
                                                       ctypes.byref(count), perfs),
           f"cudnnGet{what}Algorithm_v7")
    usable = [p for p in perfs[:count.value]
              if p.status == _SUCCESS and p.algo in allowed and p.memory <= limit]
    if not usable:
        raise CudnnError(f"cuDNN offers no exact {what} algorithm for this geometry")
    chosen = next((p for p in usable if p.determinism == _DETERMINISTIC), usable[0])
    size = ctypes.c_size_t(0)
    _check(getattr(lib, f"cudnnGet{what}WorkspaceSize")(handle, *descriptors, chosen.algo,
                                                        ctypes.byref(size)),
           f"cudnnGet{what}WorkspaceSize")
    return int(chosen.algo), int(size.value)


def _make_plan(lib: ctypes.CDLL, device: int, x_shape: tuple[int, ...],
               w_shape: tuple[int, ...], y_shape: tuple[int, ...], stride: tuple[int, ...],
               pad: tuple[int, ...], dilate: tuple[int, ...], groups: int, dtype: str,
               last: bool, limit: int) -> Plan:
    data_type = _DATA_TYPES[dtype]
    compute = _DATA_TYPES["float64"] if dtype == "float64" else _DATA_TYPES["float32"]
    layout = _NHWC if last else _NCHW
    x_desc, y_desc = _new(lib, "Tensor"), _new(lib, "Tensor")
    w_desc, conv_desc = _new(lib, "Filter"), _new(lib, "Convolution")
    _check(lib.cudnnSetTensor4dDescriptor(x_desc, layout, data_type, *_nchw(x_shape, last)),
           "cudnnSetTensor4dDescriptor")
    _check(lib.cudnnSetTensor4dDescriptor(y_desc, layout, data_type, *_nchw(y_shape, last)),
           "cudnnSetTensor4dDescriptor")
    # the weight: (F, C/g, kh, kw) channels-first, (F, kh, kw, C/g) channels-last (KRSC)
    _check(lib.cudnnSetFilter4dDescriptor(w_desc, data_type, layout, *_nchw(w_shape, last)),
           "cudnnSetFilter4dDescriptor")
    _check(lib.cudnnSetConvolution2dDescriptor(conv_desc, pad[0], pad[1], stride[0], stride[1],
                                               dilate[0], dilate[1], _CROSS_CORRELATION,
                                               compute), "cudnnSetConvolution2dDescriptor")
    _check(lib.cudnnSetConvolutionMathType(conv_desc, _FMA_MATH), "cudnnSetConvolutionMathType")
    if groups > 1:
        _check(lib.cudnnSetConvolutionGroupCount(conv_desc, groups),
               "cudnnSetConvolutionGroupCount")
    plan = Plan(device, x_desc, w_desc, y_desc, conv_desc, y_shape, dtype == "float64")
    handle = _handle(lib, device)
    plan.forward_algo, plan.forward_bytes = _choose(
        lib, "ConvolutionForward", _FORWARD_ALGOS, handle, (x_desc, w_desc, conv_desc, y_desc),
        limit)
    plan.data_algo, plan.data_bytes = _choose(
        lib, "ConvolutionBackwardData", _BACKWARD_DATA_ALGOS, handle,
        (w_desc, y_desc, conv_desc, x_desc), limit)
    plan.filter_algo, plan.filter_bytes = _choose(
        lib, "ConvolutionBackwardFilter", _BACKWARD_FILTER_ALGOS, handle,
        (x_desc, y_desc, conv_desc, w_desc), limit)
    return plan


def plan(x: Any, w_shape: tuple[int, ...], y_shape: tuple[int, ...], stride: tuple[int, ...],
         pad: tuple[int, ...], dilate: tuple[int, ...], groups: int, last: bool,
         workspace_mb: float | None = None) -> Plan | None:
    """The plan for convolving ``x`` (a cupy array), or None where cuDNN is not used."""
    lib = library()
    dtype = x.dtype.name
    if lib is None or dtype not in _DATA_TYPES or len(y_shape) != 4 or x.size == 0 \
            or max(x.size, math.prod(y_shape), math.prod(w_shape)) > _MAX_ELEMENTS:
        return None
    stride, pad, dilate = (tuple(int(v) for v in t) for t in (stride, pad, dilate))
    w_shape, y_shape = tuple(int(v) for v in w_shape), tuple(int(v) for v in y_shape)
    device = int(x.device.id)
    limit = workspace_limit(workspace_mb)
    key = (device, tuple(x.shape), w_shape, y_shape, stride, pad, dilate, groups, dtype, last,
           limit)
    if key in _plans:
        return _plans[key]
    with _lock:
        if key not in _plans:
            if len(_plans) >= _MAX_PLANS:
                # forget them, but destroy nothing: a pending backward may still hold a
                # plan, and its descriptors are a few hundred bytes
                _plans.clear()
            made: Plan | None
            try:
                made = _make_plan(lib, device, tuple(x.shape), w_shape, y_shape, stride, pad,
                                  dilate, groups, dtype, last, limit)
            except CudnnError:
                made = None  # a geometry cuDNN refuses: im2col, every time
            _plans[key] = made
    return _plans[key]

