"""skinny.gemm: C = A B on the GPU through skinny's registry of GEMM algorithms (cuBLAS, the tiled
SGEMM ladder, WMMA, TSM2 for tall-and-skinny products)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _skinny
from ._arrays import _c_contiguous, empty_like, is_cuda_array, synchronize_producer


def algorithms() -> list[str]:
    """The registry's algorithm names, "auto" first: the valid ``backend``/``algo`` values."""
    return list(_skinny.algo_names())


def gemm(a: Any, b: Any, *, algo: str = "auto", out: Optional[Any] = None) -> Any:
    """``a @ b`` on the GPU: a (m x k) and b (k x n) are C-contiguous CUDA arrays of one dtype (float32 or
    float64). Returns ``out`` when given (a C-contiguous m x n CUDA array of that dtype, written in
    place), else a new array of a's library (CuPy or PyTorch). Waits for the result.

    ``algo``: one of :func:`algorithms`; an algorithm that cannot do the shape raises ValueError with
    the reason. Host arrays are refused: use ``a @ b`` (NumPy) for them.
    """
    names = _skinny.algo_names()
    if algo not in names:
        raise ValueError(f"unknown algo {algo!r}; valid algorithms: {', '.join(names)}")
    a_info = _describe(a, "a")
    b_info = _describe(b, "b")
    if a_info[1] != b_info[1]:
        raise TypeError(f"gemm: a is {a_info[1]} and b is {b_info[1]}; they must have one dtype")
    (m, k), dtype = a_info
    (k2, n), _ = b_info
    if k != k2:
        raise ValueError(f"gemm: shapes {(m, k)} and {(k2, n)} do not multiply")
    if out is None:
        out = empty_like(a, (m, n), "gemm")
    else:
        o_shape, o_dtype = _describe(out, "out")
        if o_shape != (m, n) or o_dtype != dtype:
            raise ValueError(f"gemm: out is {o_shape} {o_dtype}, need {(m, n)} {dtype}")
    for x in (a, b, out):
        synchronize_producer(x)
    _skinny.gemm(a, b, out, algo)
    return out


def _describe(x: Any, name: str):
    """(shape, dtype) of a C-contiguous 2-D float32/float64 CUDA array; raises otherwise."""
    if not is_cuda_array(x):
        raise TypeError(f"gemm: {name} must be a CUDA array (CuPy, PyTorch); got {type(x).__name__} "
                        f"(for NumPy arrays use a @ b)")
    cai = x.__cuda_array_interface__
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    if len(shape) != 2:
        raise ValueError(f"gemm: {name} must be 2-D, got shape {shape}")
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"gemm: {name} has dtype {dtype}; float32 and float64 are supported")
    if not _c_contiguous(shape, cai.get("strides"), dtype.itemsize):
        raise ValueError(f"gemm: {name} must be C-contiguous (row-major); make a contiguous copy first")
    return shape, dtype
