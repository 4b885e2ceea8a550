"""Input checks: one clear exception per problem. Host arrays are checked without touching the GPU
(so that CI without a GPU exercises every check); CUDA arrays are described through
``__cuda_array_interface__`` and handed to the C++ side through DLPack, without a copy when they are
already C-contiguous float32/float64."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _skinny

_KDL_CUDA = 2  # DLPack's device type of CUDA memory
_FINITE_CHUNK = 1 << 24  # values per np.isfinite pass: bounds the temporary boolean array


def is_cuda_array(x: Any) -> bool:
    """Whether x lives in CUDA device memory (CuPy, PyTorch CUDA tensors, anything with DLPack/CAI)."""
    device = getattr(x, "__dlpack_device__", None)
    if device is not None:
        try:
            return int(device()[0]) == _KDL_CUDA
        except Exception:
            return False
    return hasattr(type(x), "__cuda_array_interface__")


def _library(x: Any) -> str:
    return type(x).__module__.split(".")[0]


def check_array(x: Any, name: str = "X", sixteen_bit: bool = False) -> Any:
    """A 2-D, non-empty, finite, C-contiguous float32/float64 array (and float16, or a PyTorch bfloat16
    tensor, when ``sixteen_bit``): a NumPy array for host input (a copy when it had another layout or
    float dtype), or the CUDA array itself (converted on the device by its own library when its dtype or
    layout is not one of those)."""
    if _is_torch_bfloat16(x):
        if not sixteen_bit:
            x = x.float()
        else:
            return _check_torch_bfloat16(x, name)
    if is_cuda_array(x):
        return _check_cuda(x, name, sixteen_bit)
    if _library(x) == "scipy" or hasattr(x, "tocsr"):
        raise TypeError(f"{name}: sparse matrices are not supported; pass a dense array")
    a = np.asarray(x)
    _check_shape(a.shape, name)
    a = np.ascontiguousarray(a, dtype=_float_dtype(a.dtype, name, sixteen_bit))
    _check_finite_host(a, name)
    return a


def _is_torch_bfloat16(x: Any) -> bool:
    return _library(x) == "torch" and str(getattr(x, "dtype", "")) == "torch.bfloat16"


def _check_torch_bfloat16(x: Any, name: str) -> Any:
    """A PyTorch bfloat16 tensor (which has no __cuda_array_interface__): on the GPU, C-contiguous, finite."""
    _check_shape(tuple(x.shape), name)
    if not x.is_cuda:
        raise TypeError(f"{name}: bfloat16 data must be a CUDA tensor (NumPy has no bfloat16); move it with .cuda() "
                        f"or pass float32")
    x = x.contiguous()
    synchronize_producer(x)
    if _skinny.count_non_finite(x) > 0:
        raise ValueError(f"{name} contains NaN or infinity; K-means needs finite values")
    return x


def _check_shape(shape: tuple, name: str) -> None:
    if len(shape) != 2:
        raise ValueError(f"{name}: expected a 2-D array (samples x features), got {len(shape)}-D with shape "
                         f"{tuple(shape)}; reshape with .reshape(-1, 1) for one feature or .reshape(1, -1) "
                         f"for one sample")
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"{name}: empty array of shape {tuple(shape)}; need at least one sample and one feature")


def _float_dtype(dtype: np.dtype, name: str, sixteen_bit: bool = False) -> np.dtype:
    """float32 and float64 stay (and float16 with ``sixteen_bit``); other floats become float32 (float16)
    or float64 (longdouble)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"{name}: dtype {dtype} is not supported; pass float32 or float64 data "
                        f"(e.g. X.astype(np.float32))")
    if dtype in (np.float32, np.float64) or (sixteen_bit and dtype == np.float16):
        return dtype
    return np.dtype(np.float32) if dtype.itemsize < 4 else np.dtype(np.float64)


def _check_finite_host(a: np.ndarray, name: str) -> None:
    flat = a.reshape(-1)
    for start in range(0, flat.size, _FINITE_CHUNK):
        part = flat[start:start + _FINITE_CHUNK]
        if not np.isfinite(part).all():
            what = "NaN" if np.isnan(part).any() else "infinity"
            raise ValueError(f"{name} contains {what}; K-means needs finite values")


def _check_cuda(x: Any, name: str, sixteen_bit: bool = False) -> Any:
    try:
        cai = x.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"{name}: CUDA arrays must provide __cuda_array_interface__ (CuPy, PyTorch); "
                        f"got {type(x).__name__}") from None
    shape = tuple(cai["shape"])
    _check_shape(shape, name)
    dtype = np.dtype(cai["typestr"])
    want = _float_dtype(dtype, name, sixteen_bit)
    if dtype != want or not _c_contiguous(shape, cai.get("strides"), dtype.itemsize):
        x = _convert_on_device(x, want, name)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"{name}: CUDA arrays must support DLPack (__dlpack__); got {type(x).__name__}")
    synchronize_producer(x)
    if _skinny.count_non_finite(x) > 0:
        raise ValueError(f"{name} contains NaN or infinity; K-means needs finite values")
    return x


def _c_contiguous(shape: tuple, strides: Any, itemsize: int) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _convert_on_device(x: Any, dtype: np.dtype, name: str) -> Any:
    """A C-contiguous copy of x in `dtype`, made on the GPU by x's own library."""
    library = _library(x)
    if library == "cupy":
        import cupy
        return cupy.ascontiguousarray(x, dtype=dtype)
    if library == "torch":
        import torch
        return x.to(getattr(torch, dtype.name)).contiguous()
    raise TypeError(f"{name}: a {type(x).__name__} must be C-contiguous float32 or float64 (skinny converts only "
                    f"CuPy arrays and PyTorch tensors)")


def synchronize_producer(x: Any) -> None:
    """Waits for the work queued on x's library's current stream: skinny runs on the legacy default
    stream, which is not ordered after non-blocking streams (PyTorch's side streams, CuPy's Stream)."""
    library = _library(x)
    if library == "cupy":
        import cupy
        with cupy.cuda.Device(x.device.id):
            cupy.cuda.get_current_stream().synchronize()
    elif library == "torch":
        import torch
        torch.cuda.current_stream(x.device).synchronize()


def require_cuda(what: str) -> None:
    """RuntimeError naming `what` when no CUDA device is visible: the one message of every entry point."""
    if _skinny.cuda_device_count() == 0:
        raise RuntimeError(f"{what} needs a CUDA device and none is visible (no GPU, no driver, or "
                           f"CUDA_VISIBLE_DEVICES hides them)")


def empty_like(x: Any, shape: tuple, what: str) -> Any:
    """A new array of x's kind (NumPy, or x's CUDA library on x's device) and dtype."""
    if isinstance(x, np.ndarray):
        return np.empty(shape, dtype=x.dtype)
    library = _library(x)
    if library == "cupy":
        import cupy
        with cupy.cuda.Device(x.device.id):
            return cupy.empty(shape, dtype=x.dtype)
    if library == "torch":
        import torch
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    raise TypeError(f"{what}: cannot allocate the result for a {type(x).__name__}; pass out=")


def float_dtype_of(x: Any) -> np.dtype:
    """The NumPy dtype of a checked array (host or CUDA); float32 stands for PyTorch's bfloat16."""
    if isinstance(x, np.ndarray):
        return x.dtype
    if _is_torch_bfloat16(x):
        return np.dtype(np.float32)
    return np.dtype(x.__cuda_array_interface__["typestr"])


def compute_dtype_of(x: Any) -> np.dtype:
    """The dtype of centres and distances for data x: float64 for float64, float32 otherwise (16-bit data
    computes in float32)."""
    return np.dtype(np.float64) if float_dtype_of(x) == np.float64 else np.dtype(np.float32)


def shape_of(x: Any) -> tuple:
    if isinstance(x, np.ndarray):
        return x.shape
    if _is_torch_bfloat16(x):
        return tuple(x.shape)
    return tuple(x.__cuda_array_interface__["shape"])


def to_host(x: Any) -> Any:
    """x as something np.asarray takes: CUDA arrays are copied to the host (small inputs: weights)."""
    if not is_cuda_array(x):
        return x
    if _library(x) == "torch":
        return x.detach().cpu().numpy()
    if hasattr(x, "get"):  # CuPy
        return x.get()
    raise TypeError(f"cannot copy a {type(x).__name__} to the host; pass a NumPy array")
