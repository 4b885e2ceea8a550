"""skinny: Lloyd K-means, tall-and-skinny GEMM and algorithm-based fault tolerance on NVIDIA GPUs.

A thin Python layer over skinny's C++/CUDA library (the extension module ``skinny._skinny``, built with
nanobind). Host data (NumPy) is copied to the GPU; CUDA arrays (CuPy, PyTorch) are used in place.

    >>> import skinny
    >>> km = skinny.KMeans(n_clusters=16, random_state=0).fit(X)   # X: (n, d) float32/float64
    >>> km.labels_, km.cluster_centers_, km.inertia_
    >>> C, report = skinny.abft.protected_gemm(A, B)                 # C = A B, checked against its checksums
"""

from . import _skinny, abft
from ._skinny import __version__
from .gemm import algorithms, gemm
from .kmeans import KMeans

__all__ = ["KMeans", "gemm", "algorithms", "abft", "cuda_available", "device_count", "__version__"]


def device_count() -> int:
    """Number of visible CUDA devices; 0 without a driver or a device (never raises)."""
    return int(_skinny.cuda_device_count())


def cuda_available() -> bool:
    """Whether a CUDA device is visible: everything but parameter checks needs one."""
    return device_count() > 0
