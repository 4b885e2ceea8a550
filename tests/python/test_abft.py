"""skinny.abft: checksums, protected GEMMs, verification, fault injection.

The CPU tests (names, limits, the CPU reference against NumPy, every validation error) run everywhere: the
errors are raised before any CUDA call. The GPU tests carry @pytest.mark.gpu and are skipped ("no CUDA
device") without a GPU; see conftest.py."""

import numpy as np
import pytest

import skinny
from skinny import abft

DTYPES = [np.float32, np.float64]
# Odd shapes: 1 and non-multiples of every tile (the fused encoder's 256-row tiles and 512-column bands).
SHAPES = [(1, 1), (1, 7), (7, 1), (7, 17), (17, 127), (127, 7), (127, 129), (257, 1027), (1027, 513)]
# An error counts as above its threshold when it exceeds it by this factor: with the rounding model's tight
# threshold, rounding of the opposite sign can hide an error just above it (docs/abft-threshold.md).
DETECTION_MARGIN = 1.25
PRODUCTS = [(1, 1, 1), (1, 7, 17), (7, 1, 127), (17, 127, 7), (127, 17, 1), (127, 129, 33), (257, 1, 513),
            (300, 257, 127)]


def unit_roundoff(dtype):
    return 2.0 ** -24 if np.dtype(dtype) == np.float32 else 2.0 ** -53


def random_nonzero(shape, dtype=np.float64, seed=0):
    """|x| in [0.25, 1], random signs: never zero, so unwritten or misplaced results cannot hide."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.25, 1.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(dtype)


def numpy_checksums(a, density=0):
    """The module docstring's definitions, in float64: (rows (m, 2 nb_c), cols (2 nb_r, n))."""
    a = np.asarray(a, dtype=np.float64)
    m, n = a.shape
    bc = density if 0 < density < n else n
    br = density if 0 < density < m else m
    nbc, nbr = -(-n // bc), -(-m // br)
    rows = np.zeros((m, 2 * nbc))
    cols = np.zeros((2 * nbr, n))
    for t in range(nbc):
        block = a[:, t * bc:(t + 1) * bc]
        rows[:, 2 * t] = block.sum(axis=1)
        rows[:, 2 * t + 1] = block @ np.arange(1, block.shape[1] + 1, dtype=np.float64)
    for s in range(nbr):
        block = a[s * br:(s + 1) * br, :]
        cols[2 * s, :] = block.sum(axis=0)
        cols[2 * s + 1, :] = np.arange(1, block.shape[0] + 1, dtype=np.float64) @ block
    return rows, cols


def host(x):
    """x as a NumPy array (CuPy, PyTorch or NumPy)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "get"):
        return x.get()
    return x.detach().cpu().numpy()


# ================================================================================ CPU: names and limits

def test_backends_come_from_the_library():
    assert abft.backends() == ["cublas", "tsm2", "fused"]
    assert abft.SIDES == ("rows", "cols", "both")
    assert "abft" in skinny.__all__ and skinny.abft is abft


def test_blocks():
    assert abft.blocks(4, 2) == 2 and abft.blocks(5, 2) == 3
    assert abft.blocks(4) == 1 and abft.blocks(4, 0) == 1 and abft.blocks(4, 9) == 1
    with pytest.raises(ValueError, match="extent must be an integer >= 1, got 0"):
        abft.blocks(0)
    with pytest.raises(ValueError, match="density must be an integer >= 0, got -1"):
        abft.blocks(4, -1)


def test_cannot_encode_gives_the_library_reason():
    assert abft.cannot_encode(100, 100, backend="cublas", density=7) == ""
    assert "multiple of 512" in abft.cannot_encode(4096, 4096, backend="fused", density=1000)
    assert abft.cannot_encode(4096, 4096, backend="fused", density=1024) == ""
    assert "at most 32 checksum blocks" in abft.cannot_encode(10000, 10000, backend="tsm2", density=100)
    with pytest.raises(ValueError, match="unknown backend 'magma'; valid: cublas, tsm2, fused"):
        abft.cannot_encode(4, 4, backend="magma")


def test_flip_bit():
    assert abft.flip_bit(1.0, 31, np.float32) == -1.0
    assert abft.flip_bit(1.0, 22, "float32") == 1.5  # the top mantissa bit: 1 + 2^-1
    assert abft.flip_bit(1.0, 53) == 0.25  # float64 exponent 1023 - 2
    assert abft.flip_bit(abft.flip_bit(3.0, 7), 7) == 3.0
    assert abft.flip_bit(1.0, 0, np.float32).dtype == np.float32
    with pytest.raises(ValueError, match=r"bit = 32 is out of range \[0, 32\)"):
        abft.flip_bit(1.0, 32, np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        abft.flip_bit(1.0, 3, np.int32)


# ========================================================================= CPU: the reference encoding

def test_reference_encode_by_hand():
    # A = [1 2 3; 4 5 6]: row sums 6, 15 (weighted 1 + 4 + 9 = 14, 4 + 10 + 18 = 32); column sums 5, 7, 9
    # (weighted 1 + 8 = 9, 2 + 10 = 12, 3 + 12 = 15).
    cs = abft.reference_encode([[1.0, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(cs.rows, [[6, 14], [15, 32]])
    np.testing.assert_array_equal(cs.cols, [[5, 7, 9], [9, 12, 15]])
    assert cs.density == 0
    # Blocks of 2 columns: (1 + 2, 1 + 4), (3 + 4, 3 + 8); weights restart in every block.
    cs = abft.reference_encode(np.array([[1.0, 2, 3, 4]]), density=2)
    np.testing.assert_array_equal(cs.rows, [[3, 5, 7, 11]])
    np.testing.assert_array_equal(cs.cols, [[1, 2, 3, 4], [1, 2, 3, 4]])


@pytest.mark.parametrize("shape", SHAPES[:7])
@pytest.mark.parametrize("density", [0, 3, 100])
def test_reference_encode_matches_numpy(shape, density):
    a = random_nonzero(shape, seed=sum(shape))
    cs = abft.reference_encode(a, density=density)
    rows, cols = numpy_checksums(a, density)
    assert cs.rows.dtype == np.float64 and cs.rows.shape == rows.shape and cs.cols.shape == cols.shape
    assert cs.rows.shape == (shape[0], 2 * abft.blocks(shape[1], density))
    np.testing.assert_allclose(cs.rows, rows, rtol=1e-12, atol=1e-12 * shape[1] ** 2)
    np.testing.assert_allclose(cs.cols, cols, rtol=1e-12, atol=1e-12 * shape[0] ** 2)


def test_reference_encode_takes_any_layout_and_read_only_arrays():
    a = random_nonzero((9, 5), seed=3)
    want = abft.reference_encode(a)
    fortran = np.asfortranarray(a)
    read_only = a.copy()
    read_only.flags.writeable = False
    for x in (fortran, read_only):
        got = abft.reference_encode(x)
        np.testing.assert_array_equal(got.rows, want.rows)
        np.testing.assert_array_equal(got.cols, want.cols)
    a32 = a.astype(np.float32)  # float32 input: sums in double of the float32 values
    rows, cols = numpy_checksums(a32)
    np.testing.assert_allclose(abft.reference_encode(a32).rows, rows, rtol=1e-13)
    np.testing.assert_allclose(abft.reference_encode(a32).cols, cols, rtol=1e-13)


# =================================================================================== CPU: validation

class Unreachable:
    """Stands in for the compiled object of an Encoder/ProtectedGemm built without a GPU: validation must
    refuse before anything reaches it."""

    def __getattr__(self, name):
        raise AssertionError(f"the library was reached ({name}) although the arguments are invalid")


class Recorder:
    """A compiled ProtectedGemm stand-in that records verify_and_correct's argument and reports clean."""

    device = 0

    def __init__(self):
        self.calls = []

    def verify_and_correct(self, c):
        self.calls.append(c)
        return {"finding": "clean", "row": -1, "col": -1, "error": 0.0, "inconsistent_rows": 0,
                "inconsistent_cols": 0, "max_ratio": 0.0}


def offline_gemm(m=4, n=3, k=5, dtype=np.float64, multiplied=True, compiled=None):
    """A ProtectedGemm as __init__ leaves it, without a GPU (the compiled part replaced)."""
    pg = abft.ProtectedGemm.__new__(abft.ProtectedGemm)
    pg.shape, pg.dtype, pg.backend, pg.gamma, pg.threshold = (m, n, k), np.dtype(dtype), "auto", 16.0, 0.0
    pg.threshold_model = "rounding"
    pg._pg = compiled if compiled is not None else Unreachable()
    pg.device, pg._multiplied = 0, multiplied
    return pg


def offline_encoder(m=4, n=3, dtype=np.float64, side="both", density=0):
    enc = abft.Encoder.__new__(abft.Encoder)
    enc.shape, enc.dtype, enc.side, enc.backend, enc.density = (m, n), np.dtype(dtype), side, "fused", density
    enc._encoder, enc.device = Unreachable(), 0
    return enc


A = random_nonzero((4, 5), seed=1)
B = random_nonzero((5, 3), seed=2)


def entry_points_reading(x):
    """Every call that reads the array x as an input, with otherwise valid arguments."""
    return {
        "encode": lambda: abft.encode(x),
        "reference_encode": lambda: abft.reference_encode(x),
        "Encoder": lambda: offline_encoder()(x),
        "protected_gemm a": lambda: abft.protected_gemm(x, B),
        "protected_gemm b": lambda: abft.protected_gemm(A, x),
        "multiply a": lambda: offline_gemm().multiply(x, B),
        "multiply b": lambda: offline_gemm().multiply(A, x),
        "multiply_and_verify a": lambda: offline_gemm().multiply_and_verify(x, B),
        "multiply_and_verify b": lambda: offline_gemm().multiply_and_verify(A, x),
    }


def entry_points_writing(x):
    """Every call that writes the array x in place."""
    return {
        "verify_and_correct": lambda: offline_gemm(m=4, n=3).verify_and_correct(x),
        "multiply out": lambda: offline_gemm().multiply(A, B, out=x),
        "multiply_and_verify out": lambda: offline_gemm().multiply_and_verify(A, B, out=x),
        "inject_add": lambda: abft.inject_add(x, 0, 0, 1.0),
        "inject_bit_flip": lambda: abft.inject_bit_flip(x, seed=1),
        "Encoder rows_out": lambda: offline_encoder(4, 5)(A, rows_out=x),
    }


@pytest.mark.parametrize("bad", [np.zeros(5), np.zeros((2, 3, 4)), np.float64(1.0)])
def test_wrong_ndim(bad):
    for name, call in {**entry_points_reading(bad), **entry_points_writing(bad)}.items():
        if isinstance(bad, np.ndarray):
            with pytest.raises(ValueError, match=r"must be 2-D, got \d-D with shape"):
                call()
        elif name in entry_points_writing(bad):  # a NumPy scalar cannot be written in place
            with pytest.raises(TypeError, match="must be a NumPy array or a CUDA array"):
                call()
        else:
            with pytest.raises(ValueError, match=r"must be 2-D, got 0-D with shape \(\)"):
                call()


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_empty(shape):
    for name, call in {**entry_points_reading(np.zeros(shape)), **entry_points_writing(np.zeros(shape))}.items():
        with pytest.raises(ValueError, match=rf"is empty \(shape \({shape[0]}, {shape[1]}\)\)"):
            call()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, bool, np.float16, np.complex64, object])
def test_non_float_dtypes_are_type_errors(dtype):
    for calls in (entry_points_reading(np.ones((4, 5), dtype=dtype)),
                  entry_points_writing(np.ones((4, 3), dtype=dtype))):
        for name, call in calls.items():
            with pytest.raises(TypeError, match=f"has dtype {np.dtype(dtype)}; float32 or float64"):
                call()


def test_strings_lists_and_sparse():
    with pytest.raises(TypeError, match="dtype <U1"):
        abft.encode([["a", "b"], ["c", "d"]])
    with pytest.raises(TypeError, match="dtype int64"):
        abft.encode([[1, 2], [3, 4]])  # NumPy makes integers of integer lists: no silent conversion
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="sparse"):
        abft.encode(sparse.random(4, 4, density=0.5, format="csr"))


@pytest.mark.parametrize("value, what", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")])
def test_non_finite_inputs(value, what):
    for dtype in DTYPES:
        a = A.astype(dtype)
        a[2, 3] = value
        for name, call in entry_points_reading(a).items():
            if name.endswith(" b"):
                continue
            with pytest.raises(ValueError, match=rf"a contains {what} \(a\[2, 3\] = {value}\)"):
                call()
        b = B.astype(dtype)
        b[4, 0] = value
        with pytest.raises(ValueError, match=rf"b contains {what} \(b\[4, 0\]"):
            abft.protected_gemm(A.astype(dtype), b)
        with pytest.raises(ValueError, match=rf"b contains {what}"):
            offline_gemm(dtype=dtype).multiply(A.astype(dtype), b)


def test_verify_takes_a_product_with_infinities_and_nans():
    # A fault in C may be an infinity or a NaN: verify_and_correct is what corrects it, so it must reach it.
    recorder = Recorder()
    c = np.ones((4, 3))
    c[1, 2] = np.inf
    c[0, 0] = np.nan
    report = offline_gemm(compiled=recorder).verify_and_correct(c)
    assert len(recorder.calls) == 1 and recorder.calls[0] is c and report == abft.Report("clean")
    assert report.clean and not report.detected and not report.corrected


def test_shapes_that_do_not_match():
    with pytest.raises(ValueError, match=r"shapes \(4, 5\) and \(4, 5\) do not multiply \(a has 5 columns, b 4 rows\)"):
        abft.protected_gemm(A, A)
    pg = offline_gemm(m=4, n=3, k=5)
    with pytest.raises(ValueError, match=r"multiply: a has shape \(5, 4\), this object works on \(4, 5\)"):
        pg.multiply(A.T, B)
    with pytest.raises(ValueError, match=r"multiply: b has shape \(5, 4\), this object works on \(5, 3\)"):
        pg.multiply(A, np.ones((5, 4)))
    with pytest.raises(ValueError, match=r"multiply: out has shape \(3, 4\), need \(4, 3\)"):
        pg.multiply(A, B, out=np.empty((3, 4)))
    with pytest.raises(ValueError, match=r"multiply_and_verify: a has shape \(5, 4\), this object works on \(4, 5\)"):
        pg.multiply_and_verify(A.T, B)
    with pytest.raises(ValueError, match=r"multiply_and_verify: out has shape \(3, 4\), need \(4, 3\)"):
        pg.multiply_and_verify(A, B, out=np.empty((3, 4)))
    with pytest.raises(ValueError, match=r"verify_and_correct: c has shape \(4, 4\), need \(4, 3\)"):
        pg.verify_and_correct(np.empty((4, 4)))
    with pytest.raises(ValueError, match=r"Encoder: a has shape \(5, 4\), this object works on \(4, 5\)"):
        offline_encoder(4, 5)(A.T)
    with pytest.raises(ValueError, match=r"rows_out has shape \(4, 3\), need \(4, 2\)"):
        offline_encoder(4, 5)(A, rows_out=np.empty((4, 3)))
    with pytest.raises(ValueError, match=r"cols_out has shape \(2, 4\), need \(2, 5\)"):
        offline_encoder(4, 5)(A, cols_out=np.empty((2, 4)))
    with pytest.raises(ValueError, match=r"rows_out was given, but side='cols' computes no row checksums"):
        offline_encoder(4, 5, side="cols")(A, rows_out=np.empty((4, 2)))


def test_dtypes_that_do_not_match():
    with pytest.raises(TypeError, match="a is float32 and b is float64; they must have one dtype"):
        abft.protected_gemm(A.astype(np.float32), B)
    pg = offline_gemm(dtype=np.float32)
    with pytest.raises(TypeError, match="a has dtype float64, this object works on float32"):
        pg.multiply(A, B.astype(np.float32))
    with pytest.raises(TypeError, match="c has dtype float64, need float32"):
        pg.verify_and_correct(np.empty((4, 3)))
    with pytest.raises(TypeError, match="out has dtype float64, need float32"):
        pg.multiply(A.astype(np.float32), B.astype(np.float32), out=np.empty((4, 3)))
    with pytest.raises(TypeError, match="a has dtype float32, this object works on float64"):
        offline_encoder(4, 5)(A.astype(np.float32))


def test_in_place_arrays_must_be_writable_contiguous_arrays():
    pg = offline_gemm(m=4, n=3)
    read_only = np.ones((4, 3))
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="c is read-only; it is written in place"):
        pg.verify_and_correct(read_only)
    with pytest.raises(ValueError, match="c must be C-contiguous"):
        pg.verify_and_correct(np.asfortranarray(np.ones((4, 3))))
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        abft.inject_add(np.ones((6, 8))[:, ::2], 0, 0, 1.0)
    with pytest.raises(TypeError, match="must be a NumPy array or a CUDA array .* got list"):
        pg.verify_and_correct([[1.0] * 3] * 4)
    with pytest.raises(TypeError, match="got list"):
        abft.inject_bit_flip([[1.0, 2.0]])


def test_inputs_may_be_read_only_or_strided():
    # Inputs are only read: a read-only or Fortran-ordered array is fine (copied when not C-contiguous).
    read_only = A.copy()
    read_only.flags.writeable = False
    for a in (read_only, np.asfortranarray(A), np.ones((8, 10))[::2, ::2]):
        with pytest.raises(AssertionError, match="the library was reached"):
            offline_gemm().multiply(a, B)


@pytest.mark.parametrize("kwargs, message", [
    ({"side": "diagonal"}, "unknown side 'diagonal'; valid: rows, cols, both"),
    ({"backend": "magma"}, "unknown backend 'magma'; valid: cublas, tsm2, fused"),
    ({"density": -1}, "density must be an integer >= 0, got -1"),
    ({"density": 2.5}, "density must be an integer >= 0, got 2.5"),
    ({"density": True}, "density must be an integer >= 0, got True"),
])
def test_bad_encode_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        abft.encode(A, **kwargs)
    with pytest.raises(ValueError, match=message):
        abft.Encoder((4, 5), **kwargs)


def test_encoder_that_cannot_do_the_shape_says_why():
    with pytest.raises(ValueError, match=r"backend 'fused' cannot encode a \(8, 1000\) matrix: .*multiple of 512"):
        abft.encode(np.ones((8, 1000)), density=100)
    with pytest.raises(ValueError, match=r"backend 'tsm2' cannot encode a \(1, 70\) matrix: .*at most 32"):
        abft.Encoder((1, 70), backend="tsm2", density=2)
    with pytest.raises(ValueError, match=r"shape must be \(m, n\), got \(4,\)"):
        abft.Encoder((4,))
    with pytest.raises(ValueError, match="n must be an integer >= 1, got 0"):
        abft.Encoder((4, 0))
    with pytest.raises(TypeError, match="dtype int32 is not supported; use float32 or float64"):
        abft.Encoder((4, 4), np.int32)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"m": 0}, ValueError, "m must be an integer >= 1, got 0"),
    ({"k": 2.0}, ValueError, "k must be an integer >= 1, got 2.0"),
    ({"dtype": np.float16}, TypeError, "dtype float16 is not supported"),
    ({"dtype": "int64"}, TypeError, "dtype int64 is not supported"),
    ({"backend": "fastest"}, ValueError, "unknown backend 'fastest'; valid: auto, cublas"),
    ({"backend": "wmma"}, ValueError, r"backend 'wmma' cannot compute a \(4, 5\) x \(5, 3\) float32 product: wmma"),
    ({"gamma": 0}, ValueError, "gamma must be a finite number > 0, got 0"),
    ({"gamma": float("nan")}, ValueError, "gamma must be a finite number > 0, got nan"),
    ({"threshold": -1.0}, ValueError, "threshold must be a finite number >= 0, got -1.0"),
    ({"threshold": float("inf")}, ValueError, "threshold must be a finite number >= 0, got inf"),
    ({"threshold_model": "tight"}, ValueError, "unknown threshold_model 'tight'; valid: rounding, l1"),
    ({"device": -1}, ValueError, "device must be an integer >= 0, got -1"),
])
def test_bad_protected_gemm_parameters(kwargs, error, message):
    args = {"m": 4, "n": 3, "k": 5, **kwargs}
    with pytest.raises(error, match=message):
        abft.ProtectedGemm(args.pop("m"), args.pop("n"), args.pop("k"), **args)


def test_bad_protected_gemm_function_parameters():
    with pytest.raises(ValueError, match="unknown backend 'fastest'"):
        abft.protected_gemm(A, B, backend="fastest")
    with pytest.raises(ValueError, match="gamma must be a finite number > 0"):
        abft.protected_gemm(A, B, gamma=-1)
    with pytest.raises(ValueError, match="unknown threshold_model 'L1'; valid: rounding, l1"):
        abft.protected_gemm(A, B, threshold_model="L1")
    with pytest.raises(ValueError, match=r"backend 'wmma' cannot compute a \(4, 5\) x \(5, 3\) float64 product"):
        abft.protected_gemm(A, B, backend="wmma")


def test_default_gamma_is_the_library_calibration():
    assert abft.default_gamma("l1", np.float32) == abft.default_gamma("l1", np.float64) == 16.0
    for dtype in DTYPES:
        assert 0 < abft.default_gamma("rounding", dtype) < 16.0
    assert abft.default_gamma() == abft.default_gamma("rounding", np.float32)
    with pytest.raises(ValueError, match="unknown threshold_model 'exact'"):
        abft.default_gamma("exact")
    with pytest.raises(TypeError, match="dtype float16 is not supported"):
        abft.default_gamma("l1", np.float16)


def test_verify_and_thresholds_before_multiply():
    pg = offline_gemm(m=4, n=3, multiplied=False)
    with pytest.raises(RuntimeError, match="call multiply first"):
        pg.verify_and_correct(np.ones((4, 3)))
    with pytest.raises(RuntimeError, match="call multiply first"):
        pg.threshold_row(0)
    with pytest.raises(IndexError, match=r"threshold_row: index 4 out of range \[0, 4\)"):
        pg.threshold_row(4)
    with pytest.raises(IndexError, match=r"threshold_col: index -1 out of range \[0, 3\)"):
        pg.threshold_col(-1)


@pytest.mark.parametrize("kwargs, message", [
    ({"seed": -1}, "seed must be an integer >= 0, got -1"),
    ({"seed": 1 << 64}, "seed must be < 2\\*\\*64"),
    ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5"),
    ({"bits": "middle"}, "unknown bits 'middle'; valid: all, sign, exponent, high, low"),
    ({"row": 4}, r"row = 4 is out of range \[0, 4\)"),
    ({"col": -1}, r"col = -1 is out of range \[0, 3\)"),
    ({"bit": 32}, r"bit = 32 is out of range \[0, 32\)"),
])
def test_bad_injection_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        abft.inject_bit_flip(np.ones((4, 3), dtype=np.float32), **kwargs)


def test_bad_inject_add_parameters():
    x = np.ones((4, 3))
    with pytest.raises(ValueError, match=r"row = 5 is out of range \[0, 4\)"):
        abft.inject_add(x, 5, 0, 1.0)
    with pytest.raises(ValueError, match=r"col = 3 is out of range \[0, 3\)"):
        abft.inject_add(x, 0, 3, 1.0)
    with pytest.raises(TypeError, match="value must be a real number, got '1'"):
        abft.inject_add(x, 0, 0, "1")


def test_library_errors_translate_to_python_exceptions():
    # The compiled layer checks again for direct callers: std::invalid_argument arrives as ValueError.
    with pytest.raises(ValueError, match="unknown ABFT backend 'magma'"):
        skinny._skinny.abft_cannot_encode("magma", 4, 4, 0)
    with pytest.raises(ValueError, match="unknown GEMM algorithm 'bogus'"):
        skinny._skinny.abft_cannot_multiply(4, 4, 4, "bogus", "float32")
    with pytest.raises(ValueError, match="flip_bit: bit 64 out of range"):
        skinny._skinny.abft_flip_bit(1.0, 64, "float64")


@pytest.mark.skipif(skinny.cuda_available(), reason="checks the behaviour without a CUDA device")
def test_without_a_device_work_raises_runtime_error():
    x = np.ones((4, 3))
    calls = {
        "encode": lambda: abft.encode(A),
        "Encoder": lambda: abft.Encoder((4, 5)),
        "ProtectedGemm": lambda: abft.ProtectedGemm(4, 3, 5),
        "protected_gemm": lambda: abft.protected_gemm(A, B),
        "inject_bit_flip": lambda: abft.inject_bit_flip(x),
        "inject_add": lambda: abft.inject_add(x, 0, 0, 1.0),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=f"skinny.abft.{name} needs a CUDA device and none is visible"):
            call()
    # Past the Python checks, the library's own CUDA error is a RuntimeError with its message.
    with pytest.raises(RuntimeError, match="CUDA error"):
        skinny._skinny.AbftProtectedGemm(4, 3, 5, "float32", "auto", 16.0, 0.0, "rounding", -1)


# ============================================================================================ GPU: encode

def checksum_error(got, a, density, side):
    """Norm-wise error of the checksums `got` (rows or cols) against NumPy's float64 ones, relative to the
    same checksums of |a| (the magnitude the rounding errors scale with)."""
    want = numpy_checksums(a, density)[side == "cols"]
    scale = numpy_checksums(np.abs(a.astype(np.float64)), density)[side == "cols"]
    return np.linalg.norm(host(got).astype(np.float64) - want) / np.linalg.norm(scale)


def checksum_bound(a, dtype):
    return 8 * np.sqrt(max(a.shape)) * unit_roundoff(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["cublas", "tsm2", "fused"])
@pytest.mark.parametrize("density", [0, 512, 3])
def test_encode_matches_numpy(dtype, backend, density):
    tested = 0
    for m, n in SHAPES:
        if abft.cannot_encode(m, n, backend=backend, density=density):
            continue
        a = random_nonzero((m, n), dtype, seed=m * 7 + n)
        cs = abft.encode(a, backend=backend, density=density)
        assert isinstance(cs.rows, np.ndarray) and cs.rows.dtype == dtype and cs.cols.dtype == dtype
        assert cs.rows.shape == (m, 2 * abft.blocks(n, density)) and cs.cols.shape == (2 * abft.blocks(m, density), n)
        for side, got in (("rows", cs.rows), ("cols", cs.cols)):
            err = checksum_error(got, a, density, side)
            assert err <= checksum_bound(a, dtype), (backend, m, n, density, side, err)
        tested += 1
    assert tested > 0


@pytest.mark.gpu
@pytest.mark.parametrize("side", ["rows", "cols"])
def test_encode_one_side(side):
    a = random_nonzero((127, 33), np.float32, seed=5)
    cs = abft.encode(a, side=side, backend="cublas")
    other = "cols" if side == "rows" else "rows"
    assert getattr(cs, other) is None
    assert checksum_error(getattr(cs, side), a, 0, side) <= checksum_bound(a, np.float32)


@pytest.mark.gpu
def test_encoder_reuse_and_outputs_in_place():
    enc = abft.Encoder((257, 17), np.float64, backend="fused")
    rows, cols = np.full((257, 2), np.nan), np.full((2, 17), np.nan)
    for seed in range(3):
        a = random_nonzero((257, 17), np.float64, seed=seed)
        cs = enc(a, rows_out=rows, cols_out=cols)
        assert cs.rows is rows and cs.cols is cols
        assert checksum_error(rows, a, 0, "rows") <= checksum_bound(a, np.float64)
        assert checksum_error(cols, a, 0, "cols") <= checksum_bound(a, np.float64)


@pytest.mark.gpu
def test_encode_reads_read_only_and_strided_arrays():
    a = random_nonzero((64, 40), np.float64, seed=9)
    want = abft.encode(a)
    ro = a.copy()
    ro.flags.writeable = False
    for x in (ro, np.asfortranarray(a)):
        got = abft.encode(x)
        np.testing.assert_allclose(got.rows, want.rows, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(got.cols, want.cols, rtol=1e-13, atol=1e-13)


# ==================================================================================== GPU: protected GEMM

def product_tolerance(a, b, dtype):
    k = a.shape[1]
    return 16 * np.sqrt(k) * unit_roundoff(dtype) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["auto", "cublas"])
@pytest.mark.parametrize("shape", PRODUCTS)
def test_clean_product_verifies_clean(shape, backend, dtype):
    m, n, k = shape
    a, b = random_nonzero((m, k), dtype, seed=1), random_nonzero((k, n), dtype, seed=2)
    pg = abft.ProtectedGemm(m, n, k, dtype=dtype, backend=backend)
    c = pg.multiply(a, b)
    assert isinstance(c, np.ndarray) and c.shape == (m, n) and c.dtype == dtype
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(c - ref) <= product_tolerance(a, b, dtype)).all()
    report = pg.verify_and_correct(c)
    assert report.finding == "clean" and report.row == -1 and report.col == -1, report
    assert report.inconsistent_rows == 0 and report.inconsistent_cols == 0 and report.max_ratio < 1
    assert 0 < pg.min_threshold <= min(pg.threshold_row(m - 1), pg.threshold_col(n - 1))
    before = c.copy()
    assert pg.verify_and_correct(c).clean
    np.testing.assert_array_equal(c, before)  # verification of clean data changes nothing
    assert (np.abs(pg.multiply_unprotected(a, b) - ref) <= product_tolerance(a, b, dtype)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", PRODUCTS)
def test_single_error_is_detected_located_and_corrected(shape, dtype):
    m, n, k = shape
    a, b = random_nonzero((m, k), dtype, seed=3), random_nonzero((k, n), dtype, seed=4)
    pg = abft.ProtectedGemm(m, n, k, dtype=dtype)
    c = pg.multiply(a, b)
    clean = c.copy()
    rng = np.random.default_rng(m * n * k)
    for value in (1000.0, -0.5 * k, np.inf, -np.inf):
        i, j = int(rng.integers(m)), int(rng.integers(n))
        tau = max(pg.threshold_row(i), pg.threshold_col(j))
        if np.isfinite(value) and abs(value) <= DETECTION_MARGIN * tau:
            continue
        inj = abft.inject_add(c, i, j, value)
        assert (inj.row, inj.col, inj.bit) == (i, j, -1) and inj.before == clean[i, j]
        assert c[i, j] == inj.after != clean[i, j]
        report = pg.verify_and_correct(c)
        assert report.finding == "corrected" and report.corrected and report.detected, (value, report)
        assert (report.row, report.col) == (i, j)
        assert report.inconsistent_rows == 1 and report.inconsistent_cols == 1
        if np.isfinite(value):
            assert report.error == pytest.approx(float(inj.after) - float(clean[i, j]), rel=1e-3, abs=tau)
        assert abs(float(c[i, j]) - float(clean[i, j])) <= tau, (value, c[i, j], clean[i, j])
        c[i, j] = clean[i, j]
        assert pg.verify_and_correct(c).finding == "clean"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_bit_flips_are_located_and_corrected(dtype):
    m, n, k = 129, 65, 257
    a, b = random_nonzero((m, k), dtype, seed=5), random_nonzero((k, n), dtype, seed=6)
    pg = abft.ProtectedGemm(m, n, k, dtype=dtype)
    c = pg.multiply(a, b)
    clean = c.copy()
    above = 0
    for seed in range(40):
        c[...] = clean
        inj = abft.inject_bit_flip(c, seed=seed, bits="all" if seed % 2 else "exponent")
        assert 0 <= inj.row < m and 0 <= inj.col < n and 0 <= inj.bit < 8 * np.dtype(dtype).itemsize
        assert inj.before == clean[inj.row, inj.col]
        np.testing.assert_array_equal(c[inj.row, inj.col], np.asarray(inj.after, dtype=dtype))
        assert np.asarray(inj.after, dtype=dtype) == abft.flip_bit(inj.before, inj.bit, dtype) or np.isnan(inj.after)
        tau = max(pg.threshold_row(inj.row), pg.threshold_col(inj.col))
        report = pg.verify_and_correct(c)
        if abs(inj.after - inj.before) <= DETECTION_MARGIN * tau:
            continue  # not above the threshold by more than rounding: not promised (a NaN is above every threshold)
        above += 1
        assert report.finding == "corrected" and (report.row, report.col) == (inj.row, inj.col), (seed, inj, report)
        assert abs(float(c[inj.row, inj.col]) - float(clean[inj.row, inj.col])) <= tau
    assert above >= 10
    first, second = abft.inject_bit_flip(clean.copy(), seed=7), abft.inject_bit_flip(clean.copy(), seed=7)
    assert (first.row, first.col, first.bit) == (second.row, second.col, second.bit)  # drawn from the seed


@pytest.mark.gpu
def test_two_errors_are_detected_not_located():
    m, n, k = 200, 150, 100
    a, b = random_nonzero((m, k), np.float32, seed=7), random_nonzero((k, n), np.float32, seed=8)
    pg = abft.ProtectedGemm(m, n, k)
    c = pg.multiply(a, b)
    abft.inject_add(c, 3, 5, 100.0)
    abft.inject_add(c, 70, 90, -100.0)
    faulty = c.copy()
    report = pg.verify_and_correct(c)
    assert report.finding == "detected_unlocated" and report.detected and not report.corrected
    assert report.inconsistent_rows == 2 and report.inconsistent_cols == 2 and (report.row, report.col) == (-1, -1)
    np.testing.assert_array_equal(c, faulty)  # nothing changed


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_protected_gemm_function(dtype):
    a, b = random_nonzero((127, 33), dtype, seed=9), random_nonzero((33, 7), dtype, seed=10)
    c, report = abft.protected_gemm(a, b)
    assert report.clean and isinstance(c, np.ndarray) and c.dtype == dtype
    assert (np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= product_tolerance(a, b, dtype)).all()
    out = np.empty((127, 7), dtype=dtype)
    c2, _ = abft.protected_gemm(a, b, backend="cublas", out=out)
    assert c2 is out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_rounding_thresholds_sit_far_below_the_l1_bound(dtype):
    m, n, k = 257, 129, 513
    a, b = random_nonzero((m, k), dtype, seed=15), random_nonzero((k, n), dtype, seed=16)
    tight = abft.ProtectedGemm(m, n, k, dtype=dtype)
    loose = abft.ProtectedGemm(m, n, k, dtype=dtype, threshold_model="l1")
    assert (tight.threshold_model, loose.threshold_model) == ("rounding", "l1")
    assert (tight.gamma, loose.gamma) == (abft.default_gamma("rounding", dtype), 16.0)
    c, c_loose = tight.multiply(a, b), loose.multiply(a, b)
    assert tight.verify_and_correct(c).clean and loose.verify_and_correct(c_loose).clean
    # Data of mixed signs: the L1 bound grows with sum |a b|, the rounding with its square root.
    assert loose.min_threshold > 10 * tight.min_threshold
    assert loose.threshold_row(7) > 10 * tight.threshold_row(7)
    # An error between the two thresholds: caught and corrected by the rounding model only.
    tau, tau_loose = max(tight.threshold_row(7), tight.threshold_col(5)), min(loose.threshold_row(7), loose.threshold_col(5))
    error = np.sqrt(DETECTION_MARGIN * tau * tau_loose)
    assert DETECTION_MARGIN * tau < error < tau_loose
    clean = c.copy()
    abft.inject_add(c, 7, 5, error)
    abft.inject_add(c_loose, 7, 5, error)
    report = tight.verify_and_correct(c)
    assert report.corrected and (report.row, report.col) == (7, 5)
    assert abs(float(c[7, 5]) - float(clean[7, 5])) <= tau
    assert loose.verify_and_correct(c_loose).clean


@pytest.mark.gpu
def test_threshold_override():
    a, b = random_nonzero((17, 9), np.float64, seed=11), random_nonzero((9, 5), np.float64, seed=12)
    pg = abft.ProtectedGemm(17, 5, 9, dtype=np.float64, threshold=0.5)
    c = pg.multiply(a, b)
    assert pg.min_threshold == pg.threshold_row(3) == pg.threshold_col(2) == 0.5
    abft.inject_add(c, 0, 0, 0.25)  # below the absolute threshold (weights 1 at (0, 0)): not seen
    assert pg.verify_and_correct(c).clean


# =============================================================================== GPU: CUDA device arrays

def _device_round_trip(xp_asarray, is_kind, dtype):
    """encode / protected product / injection / correction on device arrays give the NumPy results."""
    a_h, b_h = random_nonzero((127, 17), dtype, seed=13), random_nonzero((17, 7), dtype, seed=14)
    a, b = xp_asarray(a_h), xp_asarray(b_h)
    cs, cs_h = abft.encode(a), abft.encode(a_h)
    assert is_kind(cs.rows) and is_kind(cs.cols)
    np.testing.assert_allclose(host(cs.rows), cs_h.rows, rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(host(cs.cols), cs_h.cols, rtol=1e-5 if dtype == np.float32 else 1e-12)
    pg = abft.ProtectedGemm(127, 7, 17, dtype=dtype)
    c = pg.multiply(a, b)
    assert is_kind(c)
    assert pg.verify_and_correct(c).clean
    clean = host(c).copy()
    inj = abft.inject_add(c, 100, 6, 1e3)
    assert (inj.row, inj.col) == (100, 6) and host(c)[100, 6] == inj.after
    report = pg.verify_and_correct(c)
    assert report.corrected and (report.row, report.col) == (100, 6)
    assert abs(host(c)[100, 6] - clean[100, 6]) <= max(pg.threshold_row(100), pg.threshold_col(6))
    flip = abft.inject_bit_flip(c, seed=3, bits="exponent")
    assert host(c)[flip.row, flip.col] == np.asarray(flip.after, dtype=dtype) or np.isnan(flip.after)
    c2, report = abft.protected_gemm(a, b)
    assert is_kind(c2) and report.clean
    with pytest.raises(TypeError, match="must all be NumPy arrays or all CUDA arrays"):
        pg.multiply(a, b_h)
    with pytest.raises(TypeError, match="must all be NumPy arrays or all CUDA arrays"):
        pg.multiply(a_h, b_h, out=c)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threshold_model", ["rounding", "l1"])
@pytest.mark.parametrize("shape", PRODUCTS)
def test_multiply_and_verify_equals_multiply_then_verify(shape, threshold_model, dtype):
    m, n, k = shape
    a, b = random_nonzero((m, k), dtype, seed=21), random_nonzero((k, n), dtype, seed=22)
    two = abft.ProtectedGemm(m, n, k, dtype=dtype, backend="cublas", threshold_model=threshold_model)
    one = abft.ProtectedGemm(m, n, k, dtype=dtype, backend="cublas", threshold_model=threshold_model)
    c_two = two.multiply(a, b)
    assert two.verify_and_correct(c_two).clean
    out = np.full((m, n), np.nan, dtype=dtype)
    c_one, report = one.multiply_and_verify(a, b, out=out)
    assert c_one is out and report.clean and report.max_ratio < 1, report
    np.testing.assert_array_equal(c_one, c_two)  # the same cuBLAS product
    for i in {0, m // 2, m - 1}:
        assert one.threshold_row(i) == pytest.approx(two.threshold_row(i), rel=1e-12)
    for j in {0, n - 1}:
        assert one.threshold_col(j) == pytest.approx(two.threshold_col(j), rel=1e-12)
    c_fn, report_fn = abft.protected_gemm(a, b, backend="cublas", threshold_model=threshold_model)
    assert report_fn.clean
    np.testing.assert_array_equal(c_fn, c_two)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_arrays(dtype):
    cupy = pytest.importorskip("cupy")
    _device_round_trip(cupy.asarray, lambda x: isinstance(x, cupy.ndarray), dtype)
    a = cupy.asarray(random_nonzero((33, 9), dtype, seed=15))
    got = abft.encode(cupy.asfortranarray(a))  # strided: copied on the device
    np.testing.assert_allclose(got.rows.get(), abft.encode(a).rows.get(), rtol=1e-5)
    bad = a.copy()
    bad[1, 2] = cupy.nan
    with pytest.raises(ValueError, match="a contains NaN or infinity"):
        abft.encode(bad)
    with pytest.raises(TypeError, match="has dtype int32"):
        abft.encode(cupy.ones((4, 4), dtype=cupy.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_tensors(dtype):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    _device_round_trip(lambda x: torch.from_numpy(x).cuda(), lambda x: isinstance(x, torch.Tensor) and x.is_cuda,
                       np.dtype(dtype))
    a = torch.randn(65, 9, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
    cs = abft.encode(a)  # the data of a tensor that requires grad
    assert isinstance(cs.rows, torch.Tensor) and cs.rows.shape == (65, 2)
    bad = torch.ones(4, 4, device="cuda")
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="a contains NaN or infinity"):
        abft.encode(bad)
