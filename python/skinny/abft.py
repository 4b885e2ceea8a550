"""skinny.abft: algorithm-based fault tolerance (Huang & Abraham, 1984) on the GPU. Checksums of a matrix,
a GEMM that carries the checksums of its product, verification that finds, locates and corrects one wrong
element of the product, and fault injection: a thin layer over the C++ library (skinny/abft/abft.hpp).

Arrays are 2-D float32 or float64 in row-major (C) order: NumPy arrays (copied to the GPU and back) or CUDA
arrays with DLPack (CuPy, PyTorch; used in place). Results are arrays of the input's kind.

Checksums of an m x n matrix A for a density b (the block size; 0: one block over the whole dimension),
with the weights 1, 2, ..., b starting again in every block:

    rows  (m, 2 * blocks(n, b))   rows[i, 2t]     = sum of A[i, j] over the columns j of block t
                                  rows[i, 2t + 1] = sum of (j - t b + 1) A[i, j] over the same columns
    cols  (2 * blocks(m, b), n)   cols[2s, j]     = sum of A[i, j] over the rows i of block s
                                  cols[2s + 1, j] = sum of (i - s b + 1) A[i, j] over the same rows

One wrong element A[i, j] + e changes row i's pair by (e, (j' + 1) e) and column j's pair by (e, (i' + 1) e)
(i', j': positions within the blocks): the ratios locate it, the difference corrects it.

    >>> from skinny import abft
    >>> cs = abft.encode(A)                       # cs.rows (m, 2), cs.cols (2, n)
    >>> C, report = abft.protected_gemm(A, B)     # report.finding: "clean", "corrected", ...
    >>> pg = abft.ProtectedGemm(m, n, k)          # or step by step:
    >>> C = pg.multiply(A, B)
    >>> abft.inject_add(C, 3, 5, 1.0)             # a fault
    >>> pg.verify_and_correct(C)                  # Report(finding='corrected', row=3, col=5, ...); C repaired
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from . import _skinny
from ._arrays import (_c_contiguous, _convert_on_device, _library, empty_like, is_cuda_array, require_cuda,
                      synchronize_producer, to_host)

SIDES = ("rows", "cols", "both")
"""Values of ``side``: row checksums, column checksums, or both."""
BIT_RANGES = ("all", "sign", "exponent", "high", "low")
"""Values of ``bits`` for :func:`inject_bit_flip` ("high"/"low": the upper/lower half of the mantissa)."""
FINDINGS = ("clean", "corrected", "detected_unlocated")
"""Values of :attr:`Report.finding`."""

DTypeLike = Union[str, type, np.dtype]
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_FINITE_CHUNK = 1 << 24  # values per np.isfinite pass: bounds the temporary boolean array


# ------------------------------------------------------------------------------------------------ results

@dataclass(frozen=True)
class Checksums:
    """Checksums of an m x n matrix (definitions in the module's docstring).

    Attributes
    ----------
    rows : array (m, 2 * blocks(n, density)) or None
        Row checksums, plain and weighted side by side per block; None when not asked for (side="cols").
    cols : array (2 * blocks(m, density), n) or None
        Column checksums, plain and weighted on top of each other per block; None for side="rows".
    density : int
        The block size they were computed for (0: one block over the whole dimension).
    """

    rows: Optional[Any]
    cols: Optional[Any]
    density: int = 0


@dataclass(frozen=True)
class Report:
    """What :meth:`ProtectedGemm.verify_and_correct` found.

    Attributes
    ----------
    finding : str
        "clean" (every checksum within its threshold), "corrected" (one inconsistent row and column: the
        element was located and corrected in place) or "detected_unlocated" (inconsistencies that do not
        point at one element, e.g. several errors; nothing was changed).
    row, col : int
        The element corrected; -1 unless finding is "corrected".
    error : float
        Its error: the value found minus the corrected value (0 unless corrected).
    inconsistent_rows, inconsistent_cols : int
        Rows and columns of C whose checksums exceeded their thresholds.
    max_ratio : float
        Largest |carried - recomputed| / threshold seen (finite ones): below 1 means clean, and on clean
        data it is the margin to a false alarm.
    """

    finding: str
    row: int = -1
    col: int = -1
    error: float = 0.0
    inconsistent_rows: int = 0
    inconsistent_cols: int = 0
    max_ratio: float = 0.0

    @property
    def clean(self) -> bool:
        return self.finding == "clean"

    @property
    def detected(self) -> bool:
        """Whether any checksum was inconsistent (corrected or not)."""
        return self.finding != "clean"

    @property
    def corrected(self) -> bool:
        return self.finding == "corrected"


@dataclass(frozen=True)
class Injection:
    """One injected fault.

    Attributes
    ----------
    row, col : int
        The element changed.
    bit : int
        The bit flipped (0: the lowest mantissa bit; the sign bit is the top one); -1 for :func:`inject_add`.
    before, after : float
        The element's value before and after.
    """

    row: int
    col: int
    bit: int
    before: float
    after: float


# ---------------------------------------------------------------------------------------------- encoding

def backends() -> list[str]:
    """The checksum encoders: "cublas" (two GEMMs through cuBLAS), "tsm2" (the same through skinny's TSM2;
    at most 32 blocks per dimension), "fused" (one kernel, one read of the matrix; a density that is a
    multiple of 512)."""
    return list(_skinny.abft_backend_names())


def blocks(extent: int, density: int = 0) -> int:
    """Number of checksum blocks along a dimension of `extent` for `density` (0, or >= extent: one)."""
    extent = _int(extent, "extent", "abft.blocks", minimum=1)
    density = _int(density, "density", "abft.blocks", minimum=0)
    return int(_skinny.abft_blocks(extent, density))


def cannot_encode(m: int, n: int, *, backend: str = "fused", density: int = 0) -> str:
    """Why `backend` cannot encode an m x n matrix at `density`: the library's reason, "" when it can."""
    where = "abft.cannot_encode"
    _choice(backend, backends(), "backend", where)
    return str(_skinny.abft_cannot_encode(backend, _int(m, "m", where), _int(n, "n", where),
                                          _int(density, "density", where)))


class Encoder:
    """Checksums of m x n matrices of one dtype (``abft::Encoder``): the weights are prepared once, so that
    each call only runs the encoding. For many matrices of one shape; :func:`encode` makes one per call.

    Parameters
    ----------
    shape : (m, n)
    dtype : float32 or float64, default float32
    side : {"rows", "cols", "both"}, default "both"
    backend : one of :func:`backends`, default "fused"
    density : int >= 0, default 0
        Block size of the checksums (0: one block over the whole dimension).
    device : int or None
        CUDA device to work on (None: the current one). CUDA arrays passed in must live there.

    Raises ValueError for bad parameters or a backend that cannot do the shape (with the library's
    reason), RuntimeError without a CUDA device. An Encoder is not meant to be shared between threads.
    """

    def __init__(self, shape: tuple[int, int], dtype: DTypeLike = np.float32, *, side: str = "both",
                 backend: str = "fused", density: int = 0, device: Optional[int] = None) -> None:
        where = "abft.Encoder"
        self.shape = _shape_param(shape, where)
        self.dtype = _float_dtype(dtype, where)
        self.side, self.backend, self.density = _encode_params(side, backend, density, where)
        _check_can_encode(self.backend, *self.shape, self.density, where)
        device = _device_param(device, where)
        require_cuda(f"skinny.{where}")
        self._encoder = _skinny.AbftEncoder(*self.shape, self.dtype.name, self.side, self.backend, self.density,
                                            -1 if device is None else device)
        self.device: int = int(self._encoder.device)

    def __call__(self, a: Any, *, rows_out: Optional[Any] = None, cols_out: Optional[Any] = None) -> Checksums:
        """The checksums of `a` (shape and dtype of this Encoder), as arrays of a's kind; ``rows_out`` /
        ``cols_out``: arrays of a's kind, C-contiguous, of the checksums' shapes, written in place and
        returned. Waits for the result."""
        where = "abft.Encoder"
        a = _operand(a, where, "a")
        _expect(a, where, "a", self.shape, self.dtype)
        _expect_device(a, self.device, where, "a")
        return self._run(a, rows_out, cols_out)

    def _run(self, a: Any, rows_out: Optional[Any], cols_out: Optional[Any]) -> Checksums:
        where = "abft.Encoder"
        m, n = self.shape
        wanted = {"rows": self.side != "cols", "cols": self.side != "rows"}
        shapes = {"rows": (m, 2 * blocks(n, self.density)), "cols": (2 * blocks(m, self.density), n)}
        outs = {}
        for kind, given in (("rows", rows_out), ("cols", cols_out)):
            if not wanted[kind]:
                if given is not None:
                    raise ValueError(f"{where}: {kind}_out was given, but side={self.side!r} computes no "
                                     f"{'row' if kind == 'rows' else 'column'} checksums")
                outs[kind] = None
            elif given is None:
                outs[kind] = empty_like(a, shapes[kind], where)
            else:
                outs[kind] = _target(given, where, f"{kind}_out", shapes[kind], self.dtype)
                _same_kind(where, a=a, **{f"{kind}_out": outs[kind]})
        self._encoder.run(a, outs["rows"], outs["cols"])
        return Checksums(outs["rows"], outs["cols"], self.density)


def encode(a: Any, *, side: str = "both", backend: str = "fused", density: int = 0) -> Checksums:
    """Checksums of the matrix `a` (m x n; NumPy or a CUDA array) on the GPU: row checksums, column
    checksums or both (``side``), by the encoder ``backend`` (:func:`backends`), in blocks of ``density``
    (0: whole dimensions). Returns :class:`Checksums` with arrays of a's kind and dtype.

    Raises TypeError for a dtype other than float32/float64, ValueError for an array that is not 2-D, empty
    or not finite, for bad parameters or a backend that cannot do the shape; RuntimeError without a GPU.
    """
    where = "abft.encode"
    side, backend, density = _encode_params(side, backend, density, where)
    a = _operand(a, where, "a")
    m, n = _shape_of(a)
    _check_can_encode(backend, m, n, density, where)
    require_cuda(f"skinny.{where}")
    encoder = Encoder((m, n), _dtype_of(a), side=side, backend=backend, density=density, device=_device_of(a))
    return encoder._run(a, None, None)


def reference_encode(a: Any, *, density: int = 0) -> Checksums:
    """The library's CPU reference of the checksums (sums in double): float64 NumPy arrays, both sides.
    Needs no GPU; CUDA arrays are copied to the host. The same checks of `a` as :func:`encode`."""
    where = "abft.reference_encode"
    density = _int(density, "density", where, minimum=0)
    a = _operand(to_host(a), where, "a")
    rows, cols = _skinny.abft_reference_encode(np.ascontiguousarray(a, dtype=np.float64), density)
    return Checksums(rows, cols, density)


# ----------------------------------------------------------------------------------------- protected GEMM

class ProtectedGemm:
    """C = A B (A m x k, B k x n) through any GEMM backend, carrying the checksums of C
    (``abft::ProtectedGemm``): :meth:`multiply` computes C with column and row checksums predicted from the
    operands, :meth:`verify_and_correct` recomputes them from C and compares; :meth:`multiply_and_verify`
    does both in one call, reading C once (the cheaper when C is checked right away).

    A carried and a recomputed checksum differ on clean data by rounding alone; a difference above the
    checksum's threshold is an error. ``threshold_model`` says how the threshold follows the data:
    "rounding" (default): ``gamma * u * sqrt(V)``, V the variance of the rounding of the sums the
    checksum compares, from the squares of the products and of C (docs/abft-threshold.md: about 20x the
    largest clean difference, so errors far below the L1 bound are caught, with no false alarm in 1000
    clean products); "l1": ``gamma * u * sqrt(k + h) * S`` (u the unit round-off, h the terms the
    checksum adds, S the same checksum of |A| |B|), far above the rounding of data of mixed signs.
    ``threshold`` > 0 replaces either by one absolute value.

    Parameters
    ----------
    m, n, k : int >= 1
    dtype : float32 or float64, default float32
    backend : str, default "auto"
        GEMM for the product: one of :func:`skinny.algorithms`.
    gamma : float > 0 or None, default None
        Safety factor of the threshold: higher means fewer false alarms, small errors unseen. None: the
        model's calibrated one (:func:`default_gamma`; 16 for "l1").
    threshold : float >= 0, default 0
        Absolute threshold for every comparison instead (0: the model's).
    threshold_model : "rounding" or "l1", default "rounding"
    device : int or None
        CUDA device to work on (None: the current one). CUDA arrays passed in must live there.

    Raises ValueError for bad parameters or a backend that cannot do the shape (with the reason),
    RuntimeError without a CUDA device. Not meant to be shared between threads.
    """

    def __init__(self, m: int, n: int, k: int, *, dtype: DTypeLike = np.float32, backend: str = "auto",
                 gamma: Optional[float] = None, threshold: float = 0.0, threshold_model: str = "rounding",
                 device: Optional[int] = None) -> None:
        where = "abft.ProtectedGemm"
        m, n, k = (_int(v, name, where, minimum=1) for v, name in ((m, "m"), (n, "n"), (k, "k")))
        self.shape = (m, n, k)
        self.dtype = _float_dtype(dtype, where)
        self.backend = _choice(backend, _skinny.algo_names(), "backend", where)
        self.threshold_model = _choice(threshold_model, THRESHOLD_MODELS, "threshold_model", where)
        self.gamma = (default_gamma(self.threshold_model, self.dtype) if gamma is None
                      else _real(gamma, "gamma", where, positive=True))
        self.threshold = _real(threshold, "threshold", where)
        _check_can_multiply(m, n, k, self.backend, self.dtype, where)
        device = _device_param(device, where)
        require_cuda(f"skinny.{where}")
        self._pg = _skinny.AbftProtectedGemm(m, n, k, self.dtype.name, self.backend, self.gamma, self.threshold,
                                             self.threshold_model, -1 if device is None else device)
        self.device: int = int(self._pg.device)
        self._multiplied = False

    def multiply(self, a: Any, b: Any, *, out: Optional[Any] = None) -> Any:
        """``a @ b`` with its carried checksums (kept for :meth:`verify_and_correct`). a (m x k) and b
        (k x n): this object's shape and dtype, both NumPy or both CUDA arrays on its device, finite. Returns
        ``out`` (written in place) or a new array of a's kind. Waits for the result."""
        c = self._multiply(a, b, out, protect=True, where="abft.ProtectedGemm.multiply")
        self._multiplied = True
        return c

    def multiply_and_verify(self, a: Any, b: Any, *, out: Optional[Any] = None) -> tuple[Any, Report]:
        """``a @ b`` verified in the same call: (C, report), a single wrong element of C corrected. One pass
        over C after the product gives its checksums and the thresholds at once, where :meth:`multiply` then
        :meth:`verify_and_correct` read it twice (docs/abft-threshold.md says what that costs, and how a
        fault's own size enters its thresholds). Arguments as for :meth:`multiply`; the thresholds are this
        product's afterwards."""
        return self._multiply_and_verify(a, b, out, "abft.ProtectedGemm.multiply_and_verify")

    def multiply_unprotected(self, a: Any, b: Any, *, out: Optional[Any] = None) -> Any:
        """The product alone, on the same backend (to measure what the protection costs)."""
        return self._multiply(a, b, out, protect=False, where="abft.ProtectedGemm.multiply_unprotected")

    def verify_and_correct(self, c: Any) -> Report:
        """Recomputes the checksums of `c` (the product of the last :meth:`multiply`, possibly changed since),
        compares them with the carried ones and corrects a single wrong element of `c` in place (any error:
        also infinity or NaN, which is why `c` may hold them). `c`: an m x n C-contiguous NumPy array
        (writable) or CUDA array on this object's device. Returns a :class:`Report`."""
        where = "abft.ProtectedGemm.verify_and_correct"
        m, n, _ = self.shape
        c = _target(c, where, "c", (m, n), self.dtype)
        _expect_device(c, self.device, where, "c")
        if not self._multiplied:
            raise RuntimeError(f"{where}: nothing to verify yet; call multiply first")
        return Report(**self._pg.verify_and_correct(c))

    @property
    def min_threshold(self) -> float:
        """Smallest threshold of the last :meth:`multiply`: errors below it cannot be told from rounding."""
        return float(self._pg.min_threshold)

    def threshold_row(self, i: int) -> float:
        """Threshold of the plain checksum of row i of C (after :meth:`multiply`)."""
        return self._threshold("threshold_row", i, self.shape[0])

    def threshold_col(self, j: int) -> float:
        """Threshold of the plain checksum of column j of C (after :meth:`multiply`)."""
        return self._threshold("threshold_col", j, self.shape[1])

    def _threshold(self, name: str, index: int, extent: int) -> float:
        where = f"abft.ProtectedGemm.{name}"
        index = _int(index, "index", where)
        if not 0 <= index < extent:
            raise IndexError(f"{where}: index {index} out of range [0, {extent})")
        if not self._multiplied:
            raise RuntimeError(f"{where}: no thresholds yet; call multiply first")
        return float(getattr(self._pg, name)(index))

    def _multiply(self, a: Any, b: Any, out: Optional[Any], protect: bool, where: str) -> Any:
        a, b, out = self._operands(a, b, out, where)
        self._pg.multiply(a, b, out, protect)
        return out

    def _multiply_and_verify(self, a: Any, b: Any, out: Optional[Any], where: str,
                             checked: bool = False) -> tuple[Any, Report]:
        a, b, out = self._operands(a, b, out, where, checked)
        report = Report(**self._pg.multiply_and_verify(a, b, out))
        self._multiplied = True
        return out, report

    def _operands(self, a: Any, b: Any, out: Optional[Any], where: str, checked: bool = False) -> tuple:
        """a and b checked against this object's shape, dtype and device, and the output (new when None)."""
        m, n, k = self.shape
        if not checked:  # protected_gemm has checked them (the finiteness check reads all of a and b)
            a = _operand(a, where, "a")
            b = _operand(b, where, "b")
        _expect(a, where, "a", (m, k), self.dtype)
        _expect(b, where, "b", (k, n), self.dtype)
        _same_kind(where, a=a, b=b)
        _expect_device(a, self.device, where, "a")
        if out is None:
            out = empty_like(a, (m, n), where)
        else:
            out = _target(out, where, "out", (m, n), self.dtype)
            _same_kind(where, a=a, out=out)
        return a, b, out

    def __repr__(self) -> str:
        m, n, k = self.shape
        return (f"ProtectedGemm(m={m}, n={n}, k={k}, dtype={self.dtype.name}, backend={self.backend!r}, "
                f"gamma={self.gamma}, threshold={self.threshold}, threshold_model={self.threshold_model!r}, "
                f"device={self.device})")


THRESHOLD_MODELS = ("rounding", "l1")


def default_gamma(threshold_model: str = "rounding", dtype: DTypeLike = np.float32) -> float:
    """The library's calibrated safety factor of a threshold model ("rounding" or "l1") for float32 or
    float64: what :class:`ProtectedGemm` uses when gamma is None."""
    where = "abft.default_gamma"
    model = _choice(threshold_model, THRESHOLD_MODELS, "threshold_model", where)
    return float(_skinny.abft_default_gamma(model, _float_dtype(dtype, where).name))


def protected_gemm(a: Any, b: Any, *, backend: str = "auto", gamma: Optional[float] = None, threshold: float = 0.0,
                   threshold_model: str = "rounding", out: Optional[Any] = None) -> tuple[Any, Report]:
    """``a @ b`` on the GPU, verified against its carried checksums: (C, report). A single wrong element of
    C (a fault during the product) is corrected before C is returned; report.finding says what happened.
    a (m x k) and b (k x n): one dtype (float32/float64), both NumPy or both CUDA arrays (C of that kind).
    Parameters as for :class:`ProtectedGemm`; runs :meth:`ProtectedGemm.multiply_and_verify`."""
    where = "abft.protected_gemm"
    backend = _choice(backend, _skinny.algo_names(), "backend", where)
    if gamma is not None:
        gamma = _real(gamma, "gamma", where, positive=True)
    threshold = _real(threshold, "threshold", where)
    threshold_model = _choice(threshold_model, THRESHOLD_MODELS, "threshold_model", where)
    a = _operand(a, where, "a")
    b = _operand(b, where, "b")
    if _dtype_of(a) != _dtype_of(b):
        raise TypeError(f"{where}: a is {_dtype_of(a)} and b is {_dtype_of(b)}; they must have one dtype")
    (m, k), (k2, n) = _shape_of(a), _shape_of(b)
    if k != k2:
        raise ValueError(f"{where}: shapes {(m, k)} and {(k2, n)} do not multiply (a has {k} columns, b {k2} rows)")
    _same_kind(where, a=a, b=b)
    _check_can_multiply(m, n, k, backend, _dtype_of(a), where)
    require_cuda(f"skinny.{where}")
    pg = ProtectedGemm(m, n, k, dtype=_dtype_of(a), backend=backend, gamma=gamma, threshold=threshold,
                       threshold_model=threshold_model, device=_device_of(a))
    return pg._multiply_and_verify(a, b, out, where, checked=True)


# ------------------------------------------------------------------------------------------ fault injection

def inject_bit_flip(x: Any, *, seed: int = 0, bits: str = "all", row: Optional[int] = None,
                    col: Optional[int] = None, bit: Optional[int] = None) -> Injection:
    """Flips one bit of one element of `x` in place (a C-contiguous NumPy array, writable, or CUDA array;
    float32/float64). ``row``, ``col`` and ``bit`` left None are drawn from ``seed`` (reproducibly), the bit
    within ``bits`` (:data:`BIT_RANGES`). Returns the :class:`Injection`. Needs a GPU (the library's code)."""
    where = "abft.inject_bit_flip"
    x = _target(x, where, "x")
    m, n = _shape_of(x)
    seed = _int(seed, "seed", where, minimum=0)
    if seed >= 1 << 64:
        raise ValueError(f"{where}: seed must be < 2**64, got {seed}")
    _choice(bits, BIT_RANGES, "bits", where)
    row = -1 if row is None else _index(row, m, "row", where)
    col = -1 if col is None else _index(col, n, "col", where)
    width = 8 * _dtype_of(x).itemsize
    bit = -1 if bit is None else _index(bit, width, "bit", where)
    require_cuda(f"skinny.{where}")
    return Injection(**_skinny.abft_inject_bit_flip(x, seed, bits, row, col, bit))


def inject_add(x: Any, row: int, col: int, value: float) -> Injection:
    """Adds `value` to ``x[row, col]`` in place (an array as for :func:`inject_bit_flip`; the sum rounded to
    x's dtype). Returns the :class:`Injection` (bit -1). Needs a GPU (the library's code)."""
    where = "abft.inject_add"
    x = _target(x, where, "x")
    m, n = _shape_of(x)
    row = _index(row, m, "row", where)
    col = _index(col, n, "col", where)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{where}: value must be a real number, got {value!r}")
    require_cuda(f"skinny.{where}")
    return Injection(**_skinny.abft_inject_add(x, row, col, float(value)))


def flip_bit(value: float, bit: int, dtype: DTypeLike = np.float64) -> np.floating:
    """`value` in `dtype` with bit `bit` of its binary representation flipped (0: the lowest mantissa
    bit; 31 or 63: the sign). Needs no GPU."""
    where = "abft.flip_bit"
    dtype = _float_dtype(dtype, where)
    bit = _index(bit, 8 * dtype.itemsize, "bit", where)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{where}: value must be a real number, got {value!r}")
    return dtype.type(_skinny.abft_flip_bit(float(dtype.type(value)), bit, dtype.name))


# --------------------------------------------------------------------------------------------- checking

def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int(v: Any, name: str, where: str, minimum: Optional[int] = None) -> int:
    if not _is_int(v) or (minimum is not None and v < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{where}: {name} must be an integer{bound}, got {v!r}")
    return int(v)


def _index(v: Any, extent: int, name: str, where: str) -> int:
    v = _int(v, name, where)
    if not 0 <= v < extent:
        raise ValueError(f"{where}: {name} = {v} is out of range [0, {extent})")
    return v


def _real(v: Any, name: str, where: str, positive: bool = False) -> float:
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v) and (v > 0 if positive else v >= 0)
    if not ok:
        raise ValueError(f"{where}: {name} must be a finite number {'> 0' if positive else '>= 0'}, got {v!r}")
    return float(v)


def _choice(v: Any, choices: Any, name: str, where: str) -> str:
    choices = list(choices)
    if not isinstance(v, str) or v not in choices:
        raise ValueError(f"{where}: unknown {name} {v!r}; valid: {', '.join(choices)}")
    return v


def _float_dtype(dtype: Any, where: str) -> np.dtype:
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: dtype {dtype!r} is not supported; use float32 or float64") from None
    if d not in _FLOATS:
        raise TypeError(f"{where}: dtype {d} is not supported; use float32 or float64")
    return d


def _shape_param(shape: Any, where: str) -> tuple[int, int]:
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ValueError(f"{where}: shape must be (m, n), got {shape!r}")
    return _int(shape[0], "m", where, minimum=1), _int(shape[1], "n", where, minimum=1)


def _device_param(device: Any, where: str) -> Optional[int]:
    return None if device is None else _int(device, "device", where, minimum=0)


def _encode_params(side: Any, backend: Any, density: Any, where: str):
    return (_choice(side, SIDES, "side", where), _choice(backend, backends(), "backend", where),
            _int(density, "density", where, minimum=0))


def _check_can_encode(backend: str, m: int, n: int, density: int, where: str) -> None:
    why = _skinny.abft_cannot_encode(backend, m, n, density)
    if why:
        raise ValueError(f"{where}: backend {backend!r} cannot encode a ({m}, {n}) matrix: {why}")


def _check_can_multiply(m: int, n: int, k: int, backend: str, dtype: np.dtype, where: str) -> None:
    why = _skinny.abft_cannot_multiply(m, n, k, backend, dtype.name)
    if why:
        raise ValueError(f"{where}: backend {backend!r} cannot compute a ({m}, {k}) x ({k}, {n}) {dtype} product: "
                         f"{why}")


def _detached(x: Any) -> Any:
    """PyTorch tensors that require grad export neither DLPack nor the CUDA array interface: their data."""
    return x.detach() if _library(x) == "torch" and getattr(x, "requires_grad", False) else x


def _describe(x: Any, where: str, name: str) -> tuple[tuple, np.dtype, bool]:
    """(shape, dtype, C-contiguous) of a CUDA array, from its CUDA array interface."""
    try:
        cai = x.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"{where}: {name}: CUDA arrays must provide __cuda_array_interface__ (CuPy, PyTorch); "
                        f"got {type(x).__name__}") from None
    shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
    return shape, dtype, _c_contiguous(shape, cai.get("strides"), dtype.itemsize)


def _check_shape(shape: tuple, where: str, name: str) -> None:
    if len(shape) != 2:
        raise ValueError(f"{where}: {name} must be 2-D, got {len(shape)}-D with shape {tuple(shape)}")
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"{where}: {name} is empty (shape {tuple(shape)}); need at least one row and one column")


def _check_dtype(dtype: np.dtype, where: str, name: str) -> None:
    if dtype not in _FLOATS:
        raise TypeError(f"{where}: {name} has dtype {dtype}; float32 or float64 is needed "
                        f"(e.g. {name}.astype(np.float32))")


def _check_finite_host(a: np.ndarray, where: str, name: str) -> None:
    flat = a.reshape(-1)
    for start in range(0, flat.size, _FINITE_CHUNK):
        finite = np.isfinite(flat[start:start + _FINITE_CHUNK])
        if not finite.all():
            index = start + int(np.argmin(finite))
            i, j = divmod(index, a.shape[1])
            what = "NaN" if np.isnan(flat[index]) else "infinity"
            raise ValueError(f"{where}: {name} contains {what} ({name}[{i}, {j}] = {flat[index]}); the checksums "
                             f"need finite values")


def _operand(x: Any, where: str, name: str) -> Any:
    """An array the library reads: 2-D, not empty, float32/float64, finite, C-contiguous. Host input
    becomes a NumPy array (a contiguous copy when needed); a CUDA array stays on its device (a contiguous
    copy there, by its own library, when it is strided)."""
    if is_cuda_array(x):
        x = _detached(x)
        shape, dtype, contiguous = _describe(x, where, name)
        _check_shape(shape, where, name)
        _check_dtype(dtype, where, name)
        if not contiguous:
            x = _convert_on_device(x, dtype, f"{where}: {name}")
        if not hasattr(x, "__dlpack__"):
            raise TypeError(f"{where}: {name}: CUDA arrays must support DLPack (__dlpack__); got {type(x).__name__}")
        synchronize_producer(x)
        if _skinny.count_non_finite(x) > 0:
            raise ValueError(f"{where}: {name} contains NaN or infinity; the checksums need finite values")
        return x
    if _library(x) == "scipy" or hasattr(x, "tocsr"):
        raise TypeError(f"{where}: {name}: sparse matrices are not supported; pass a dense array")
    a = np.asarray(x)
    _check_shape(a.shape, where, name)
    _check_dtype(a.dtype, where, name)
    a = np.ascontiguousarray(a)
    _check_finite_host(a, where, name)
    return a


def _target(x: Any, where: str, name: str, shape: Optional[tuple] = None, dtype: Optional[np.dtype] = None) -> Any:
    """An array the library writes in place: a NumPy array (writable) or a CUDA array, 2-D, not empty,
    float32/float64, C-contiguous (no copies: the writes must reach the caller's array); `shape` and `dtype`
    when given. Its values may be anything (a product with a fault in it holds infinities and NaNs)."""
    if is_cuda_array(x):
        x = _detached(x)
        got_shape, got_dtype, contiguous = _describe(x, where, name)
    elif isinstance(x, np.ndarray):
        got_shape, got_dtype, contiguous = x.shape, x.dtype, x.flags.c_contiguous
        if not x.flags.writeable:
            raise ValueError(f"{where}: {name} is read-only; it is written in place")
    else:
        raise TypeError(f"{where}: {name} is written in place, so it must be a NumPy array or a CUDA array "
                        f"(CuPy, PyTorch); got {type(x).__name__}")
    _check_shape(got_shape, where, name)
    _check_dtype(got_dtype, where, name)
    if not contiguous:
        raise ValueError(f"{where}: {name} must be C-contiguous (row-major), since it is written in place")
    if shape is not None and tuple(got_shape) != tuple(shape):
        raise ValueError(f"{where}: {name} has shape {tuple(got_shape)}, need {tuple(shape)}")
    if dtype is not None and got_dtype != dtype:
        raise TypeError(f"{where}: {name} has dtype {got_dtype}, need {dtype}")
    if is_cuda_array(x):
        synchronize_producer(x)
    return x


def _shape_of(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, np.ndarray) else tuple(x.__cuda_array_interface__["shape"])


def _dtype_of(x: Any) -> np.dtype:
    return x.dtype if isinstance(x, np.ndarray) else np.dtype(x.__cuda_array_interface__["typestr"])


def _device_of(x: Any) -> Optional[int]:
    """The CUDA device of x; None for host arrays."""
    if isinstance(x, np.ndarray):
        return None
    return int(x.__dlpack_device__()[1]) if hasattr(x, "__dlpack_device__") else 0


def _expect(x: Any, where: str, name: str, shape: tuple, dtype: np.dtype) -> None:
    if _shape_of(x) != tuple(shape):
        raise ValueError(f"{where}: {name} has shape {_shape_of(x)}, this object works on {tuple(shape)}")
    if _dtype_of(x) != dtype:
        raise TypeError(f"{where}: {name} has dtype {_dtype_of(x)}, this object works on {dtype}")


def _expect_device(x: Any, device: int, where: str, name: str) -> None:
    d = _device_of(x)
    if d is not None and d != device:
        raise ValueError(f"{where}: {name} is on CUDA device {d}, this object works on device {device}")


def _same_kind(where: str, **arrays: Any) -> None:
    """All host arrays, or all CUDA arrays on one device."""
    devices = {name: _device_of(x) for name, x in arrays.items()}
    names = " and ".join(devices)
    if len({d is None for d in devices.values()}) > 1:
        kinds = ", ".join(f"{name} is {'a NumPy array' if d is None else 'a CUDA array'}"
                          for name, d in devices.items())
        raise TypeError(f"{where}: {names} must all be NumPy arrays or all CUDA arrays ({kinds})")
    if len(set(devices.values())) > 1:
        where_they_are = ", ".join(f"{name} on device {d}" for name, d in devices.items())
        raise ValueError(f"{where}: {names} must be on one CUDA device ({where_they_are})")


__all__ = ["Checksums", "Report", "Injection", "Encoder", "ProtectedGemm", "backends", "blocks", "cannot_encode",
           "encode", "reference_encode", "protected_gemm", "inject_bit_flip", "inject_add", "flip_bit", "SIDES",
           "BIT_RANGES", "FINDINGS", "THRESHOLD_MODELS", "default_gamma"]
