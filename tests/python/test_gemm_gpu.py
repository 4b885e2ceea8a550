"""skinny.gemm on CuPy and PyTorch arrays against the libraries' own products. Skipped ("no CUDA
device") without a GPU; see conftest.py."""

import numpy as np
import pytest

import skinny

pytestmark = pytest.mark.gpu
SHAPES = [(1000, 64, 8), (4096, 4096, 16), (257, 129, 33)]  # tall-skinny, the main job's, odd sizes


def _tolerance(dtype, k):
    return (2e-5 if dtype == np.float32 else 1e-12) * np.sqrt(k)


@pytest.mark.parametrize("algo", skinny.algorithms())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cupy(algo, dtype):
    cupy = pytest.importorskip("cupy")
    rng = np.random.RandomState(0)
    for m, k, n in SHAPES:
        a = cupy.asarray(rng.randn(m, k).astype(dtype))
        b = cupy.asarray(rng.randn(k, n).astype(dtype))
        try:
            c = skinny.gemm(a, b, algo=algo)
        except ValueError as e:
            if algo == "auto":
                raise
            continue  # can_implement's refusal for this shape or dtype, with its reason
        assert isinstance(c, cupy.ndarray) and c.shape == (m, n) and c.dtype == dtype
        ref = a.get().astype(np.float64) @ b.get().astype(np.float64)
        err = np.abs(c.get() - ref).max() / max(1.0, np.abs(ref).max())
        assert err < _tolerance(dtype, k), (algo, m, k, n, err)


def test_cupy_out_and_errors():
    cupy = pytest.importorskip("cupy")
    a = cupy.ones((64, 32), dtype=cupy.float32)
    b = cupy.ones((32, 4), dtype=cupy.float32)
    out = cupy.full((64, 4), cupy.nan, dtype=cupy.float32)
    assert skinny.gemm(a, b, out=out) is out
    assert bool((out == 32).all())
    with pytest.raises(ValueError, match="do not multiply"):
        skinny.gemm(a, a)
    with pytest.raises(TypeError, match="one dtype"):
        skinny.gemm(a, b.astype(cupy.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        skinny.gemm(cupy.asfortranarray(a), b)
    with pytest.raises(ValueError, match="out is"):
        skinny.gemm(a, b, out=cupy.empty((4, 64), dtype=cupy.float32))


def test_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    a = torch.randn(4096, 512, device="cuda", dtype=torch.float64)
    b = torch.randn(512, 16, device="cuda", dtype=torch.float64)
    for algo in ("auto", "cublas", "tsm2"):
        c = skinny.gemm(a, b, algo=algo)
        assert isinstance(c, torch.Tensor) and c.device == a.device and c.dtype == torch.float64
        torch.testing.assert_close(c, a @ b, rtol=1e-12, atol=1e-10)
