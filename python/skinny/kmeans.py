"""skinny.KMeans: Lloyd K-means on the GPU with scikit-learn's estimator interface."""

from __future__ import annotations

import numbers
import re
import warnings
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from . import _skinny
from ._arrays import check_array, compute_dtype_of, float_dtype_of, is_cuda_array, require_cuda, shape_of, to_host
from ._base import BaseEstimator, ClusterMixin, NotFittedError, TransformerMixin, check_random_state

_INITS = ("auto", "k-means++", "k-means||", "random")


class KMeans(ClusterMixin, TransformerMixin, BaseEstimator):
    """Lloyd K-means on an NVIDIA GPU, the distances' cross term through skinny's GEMM backends.

    Follows ``sklearn.cluster.KMeans(algorithm="lloyd")``: the same parameters where they apply, the same
    convergence test (the sum of squared centre shifts <= ``tol`` times the mean feature variance), the
    same fitted attributes, and a final assignment to the returned centres.

    Parameters
    ----------
    n_clusters : int, default 8
        Number of clusters, 1 <= n_clusters <= n_samples.
    init : {"auto", "k-means++", "k-means||", "random"} or array of shape (n_clusters, n_features), default "auto"
        Initial centres: k-means++ seeding, k-means|| (scalable k-means++, cuML's default: a few rounds
        that each sample about 2 x n_clusters points at once, then reduced to n_clusters, instead of a
        pass over the data per centre) or k distinct random samples (all on the GPU, from a seed drawn
        from ``random_state``), or the given centres. "auto" (not in scikit-learn, whose default is
        k-means++): k-means++ below 64 clusters, k-means|| from 64 on, where k-means++'s pass per
        centre dominates the fit (H200, 1M x 128, 1024 clusters: 1.1 s against 0.04 s).
    oversampling_factor : float, default 2.0
        k-means||: the points sampled per round, as a multiple of n_clusters (cuML's name and default).
    init_rounds : int, default 5
        k-means||: sampling rounds, each a pass over the data (Bahmani et al.'s 5; fewer seed faster,
        with a somewhat worse start on clustered data; not in scikit-learn or cuML).
    n_init : int or "auto", default 1
        Runs with different seeds; the one with the lowest inertia is kept. "auto": 10 for
        ``init="random"``, 1 otherwise (scikit-learn's rule). Given centres run once.
    max_iter : int, default 300
        Lloyd iterations at most per run.
    tol : float, default 1e-4
        Relative tolerance of the convergence test. Whatever ``tol``, a run also stops when an iteration
        changes no label (scikit-learn's strict convergence), unless ``stop_when_stable=False``.
    random_state : None, int or numpy.random.RandomState, default None
        Draws the seed of each run.
    backend : str, default "auto"
        GEMM for the distances: one of :func:`skinny.algorithms` or "auto".
    column_copy : bool, default True
        Let the library keep a column-major copy of X on the GPU for the distance GEMM (faster for
        n_samples >= 65536 on the tall-skinny kernels; costs one more X of device memory).
    math : {"exact", "fast"}, default "exact"
        "exact": labels as an exact float argmin gives them. "fast": one product per cross term where
        the distances are fused with the argmin (many clusters) or computed by cuBLAS (float data with
        d >= 512 and k >= 1024 where X's values exceed float16's range, or ``backend="cublas"``): for
        float data float16 products on a float16 copy of X made once per fit (where its largest |x|
        lies in [2^-8, 32768] and the copy fits in GPU memory: the 11 significant bits of TF32,
        rounded to nearest, in two thirds of TF32's time), else TF32; the centroids rounded to
        float16 / bfloat16 for 16-bit data (about 3x less tensor-core work than exact); a sample whose
        two nearest centres nearly tie can take the other one. Rows of up to 4 features take the FMA
        units: exact labels (squared differences summed) in "exact", and in "fast" for up to 2
        features; "fast" with 3 features, or 4 and up to 1024 clusters, forms ||c||^2 - 2 x.c in
        float.
    stop_when_stable : bool, default True
        Stop when an iteration changes no label. False (with ``tol=0``) runs exactly ``max_iter``
        iterations, for timing (not in scikit-learn).
    max_gpu_memory : None, int or str, default None
        For host (NumPy) input: stream X through the GPU in chunks, using at most this much GPU memory,
        instead of copying it there whole: bytes, or a string with a suffix K, M, G or T (powers of 1024),
        e.g. ``"2G"``. None: only data that does not fit the GPU streams (through its free memory). A
        streamed fit gives the in-memory fit's labels; its centres are the same bits with many clusters
        (float32, ``n_clusters >= 128``) and within rounding of them otherwise; k-means++ and k-means||
        run on a sample of the rows when not all fit. Ignored for CUDA arrays (already on the GPU).
    verbose : bool, default False
        Print one line per iteration.
    protect : bool, default False
        Algorithm-based fault tolerance (not in scikit-learn): the distances are verified against checksums
        (per point, or per block of 64 points; what fails is recomputed before its labels are used), and the
        centroid sums against X's column totals, exactly. About 4-8 % more time per iteration on the
        H100's benchmark shapes (docs/fault-tolerant-kmeans.md). One device, X in its memory (not with
        ``devices`` or a streamed fit).
    devices : None, int or sequence of int, default None
        CUDA devices to fit on (not in scikit-learn). None: the current device (or a CUDA array's own).
        Several devices: X is split by rows among them (a CUDA array is first copied to the host), a
        thread drives each, and their exact integer cluster sums are added through NCCL (through host
        memory when the package was built without NCCL): the result is the one-device result, bit for
        bit, for any number of devices (see docs/multi-gpu.md). A single device (``3`` or ``[3]``) runs
        the same code on that device.

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features), dtype of X
    labels_ : ndarray (n_samples,), int32
    inertia_ : float
        Sum of squared distances of the samples to their closest centre.
    n_iter_ : int
    n_features_in_ : int
    iteration_ms_ : ndarray (n_iter_,)
        GPU time of each Lloyd iteration of the kept run, in milliseconds: from the end of the iteration
        before to its own (its assignment is queued while the host checks the one before), so it holds any
        time the GPU waited for the host (not in scikit-learn).
    stream_report_ : dict or None
        For a streamed fit: rows per chunk (``chunk_rows``), ``chunks`` per pass, whether the per-point
        arrays stayed on the GPU, the GPU memory budget and plan, the bytes copied to the GPU per iteration
        and the throughput of each iteration's copies (``h2d_gbs``, GB/s) and of the iteration as a whole
        (``stream_gbs``); None when X was fitted on the GPU whole (not in scikit-learn).
    transfer_report_ : dict or None
        For NumPy input copied to the GPU whole: the ``bytes`` copied, the copy's wall time ``ms`` and its
        throughput ``gbs`` (GB/s; from pageable memory, so below the link's pinned rate). Not part of
        ``iteration_ms_``: it is paid once per fit. None for CUDA arrays (used in place), streamed fits
        (see ``stream_report_``) and fits over several devices (not in scikit-learn).
    protection_report_ : dict or None
        With ``protect``: ``rows_verified`` (point checks), ``rows_rechecked`` (of those, points whose
        one-product distances were computed again at float accuracy, in exact mode),
        ``distance_detections`` (chunks recomputed), ``sum_detections`` (updates recomputed) and
        ``max_clean_ratio`` (the largest clean checksum difference over its bound); None without (not in
        scikit-learn).
    allreduce_ms_ : ndarray (n_iter_,)
        With ``devices``: GPU time of each iteration's collectives between the devices (not in scikit-learn).

    Notes
    -----
    X may be a NumPy array (copied to the GPU, or streamed through it: ``max_gpu_memory``; a
    ``np.memmap`` of a file larger than the GPU is read in place, chunk by chunk, never copied whole) or a
    CUDA array (CuPy, PyTorch; used in place when it is C-contiguous float32/float64/float16, or a PyTorch
    bfloat16 tensor). 16-bit data stays 16-bit on the GPU (half the memory and the reads; it is not
    streamed); its centres, distances and sums are float32. Results are NumPy arrays. ``sample_weight``
    follows scikit-learn: weighted means and inertia (an integer weight acts as that many copies of the
    sample); the seeding draws samples without regard to their weights.
    """

    def __init__(self, n_clusters: int = 8, *, init: Union[str, Any] = "auto",
                 n_init: Union[int, str] = 1, max_iter: int = 300, tol: float = 1e-4,
                 random_state: Optional[Union[int, np.random.RandomState]] = None, backend: str = "auto",
                 column_copy: bool = True, math: str = "exact", stop_when_stable: bool = True,
                 max_gpu_memory: Optional[Union[int, str]] = None, verbose: bool = False,
                 devices: Optional[Union[int, Sequence[int]]] = None, protect: bool = False,
                 oversampling_factor: float = 2.0, init_rounds: int = 5) -> None:
        # Stored unmodified (scikit-learn's rule): checks happen in fit.
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.backend = backend
        self.column_copy = column_copy
        self.math = math
        self.stop_when_stable = stop_when_stable
        self.max_gpu_memory = max_gpu_memory
        self.verbose = verbose
        self.devices = devices
        self.protect = protect
        self.oversampling_factor = oversampling_factor
        self.init_rounds = init_rounds

    # ----------------------------------------------------------------------------------------- fitting

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> "KMeans":
        """Clusters X (n_samples x n_features). ``y`` is ignored. Returns self."""
        self._check_params()
        devices = _device_list(self.devices)
        if devices is not None and is_cuda_array(X):
            X = to_host(X)  # split among the devices from the host
        X = check_array(X, sixteen_bit=devices is None)
        n_samples, n_features = shape_of(X)
        if self.n_clusters > n_samples:
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}.")
        weights = _check_sample_weight(sample_weight, n_samples)
        dtype = compute_dtype_of(X)
        init, centres, n_init = self._initial_centres(n_features, dtype)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        _require_cuda()

        args = (int(self.n_clusters), init, centres, int(self.max_iter), float(self.tol), seed, n_init, self.backend,
                bool(self.column_copy), bool(self.stop_when_stable), self.math, weights,
                _print_iteration if self.verbose else None, float(self.oversampling_factor), int(self.init_rounds))
        if devices is None:
            result = _skinny.kmeans_fit(X, *args, gpu_memory_bytes(self.max_gpu_memory), bool(self.protect))
        else:
            _check_devices_exist(devices)
            if len(devices) > n_samples:
                raise ValueError(f"devices: {len(devices)} devices for n_samples={n_samples}; need at least one "
                                 f"sample per device")
            result = _skinny.kmeans_fit_devices(X, devices, *args)
            self.allreduce_ms_ = np.asarray(result["allreduce_ms"], dtype=np.float64)
        self.cluster_centers_ = result["cluster_centers"]
        self.labels_ = result["labels"]
        self.inertia_ = float(result["inertia"])
        self.n_iter_ = int(result["n_iter"])
        self.n_features_in_ = int(n_features)
        self.iteration_ms_ = np.asarray(result["iteration_ms"], dtype=np.float64)
        self.stream_report_ = result.get("stream")
        self.transfer_report_ = result.get("transfer")
        self.protection_report_ = result.get("protection")
        if self.verbose:
            if self.transfer_report_ is not None:
                t = self.transfer_report_
                print(f"skinny.KMeans: copied X to the GPU: {t['bytes'] / 1e6:.1f} MB in {t['ms']:.1f} ms "
                      f"({t['gbs']:.1f} GB/s)")
            state = "converged" if result["converged"] else "stopped at max_iter"
            print(f"skinny.KMeans: {state} after {self.n_iter_} iterations, inertia {self.inertia_:.6e}")
        return self

    def fit_predict(self, X: Any, y: Any = None, sample_weight: Any = None) -> np.ndarray:
        """fit(X) and the labels of X."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def fit_transform(self, X: Any, y: Any = None, sample_weight: Any = None) -> np.ndarray:
        """fit(X) and the distances of X to the centres."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    # -------------------------------------------------------------------------------------- prediction

    def predict(self, X: Any) -> np.ndarray:
        """Index of the closest centre of each sample (int32; ties: the lowest index)."""
        X, centres = self._check_fitted_input(X)
        return _skinny.kmeans_predict(X, centres, self.backend, self.math)

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distances (n_samples x n_clusters) of the samples to the centres."""
        X, centres = self._check_fitted_input(X)
        return np.sqrt(_skinny.kmeans_sq_distances(X, centres, self.backend))

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Opposite of the inertia of X for the fitted centres (higher is better, as in scikit-learn)."""
        X, centres = self._check_fitted_input(X)
        weights = _check_sample_weight(sample_weight, shape_of(X)[0])
        nearest = _skinny.kmeans_sq_distances(X, centres, self.backend).min(axis=1).astype(np.float64)
        return -float(nearest.sum() if weights is None else (nearest * weights).sum())

    # --------------------------------------------------------------------------------------- checking

    def _check_params(self) -> None:
        """Every parameter, before any data or GPU work."""
        if not _is_int(self.n_clusters) or self.n_clusters < 1:
            raise ValueError(f"n_clusters must be an integer >= 1, got {self.n_clusters!r}")
        if isinstance(self.init, str):
            if self.init not in _INITS:
                raise ValueError(f"init must be 'auto', 'k-means++', 'k-means||', 'random' or an array of shape "
                                 f"(n_clusters, n_features), got {self.init!r}")
        if not (self.n_init == "auto" or (_is_int(self.n_init) and self.n_init >= 1)):
            raise ValueError(f"n_init must be an integer >= 1 or 'auto', got {self.n_init!r}")
        if self.math not in ("exact", "fast"):
            raise ValueError(f"math must be 'exact' or 'fast', got {self.math!r}")
        if not isinstance(self.stop_when_stable, (bool, np.bool_)):
            raise ValueError(f"stop_when_stable must be True or False, got {self.stop_when_stable!r}")
        if not isinstance(self.protect, (bool, np.bool_)):
            raise ValueError(f"protect must be True or False, got {self.protect!r}")
        if self.protect and self.devices is not None:
            raise ValueError("protect runs on one device; it takes no devices")
        if (not isinstance(self.oversampling_factor, numbers.Real) or isinstance(self.oversampling_factor, bool)
                or not np.isfinite(self.oversampling_factor) or self.oversampling_factor <= 0):
            raise ValueError(f"oversampling_factor must be a finite number > 0, got {self.oversampling_factor!r}")
        if not _is_int(self.init_rounds) or self.init_rounds < 1:
            raise ValueError(f"init_rounds must be an integer >= 1, got {self.init_rounds!r}")
        if not _is_int(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}")
        if (not isinstance(self.tol, numbers.Real) or isinstance(self.tol, bool) or not np.isfinite(self.tol)
                or self.tol < 0):
            raise ValueError(f"tol must be a finite number >= 0, got {self.tol!r}")
        _device_list(self.devices)
        names = _skinny.algo_names()
        if self.backend not in names:
            raise ValueError(f"unknown backend {self.backend!r}; valid backends: {', '.join(names)}")
        gpu_memory_bytes(self.max_gpu_memory)

    def _initial_centres(self, n_features: int, dtype: np.dtype):
        """(init name for the library, given centres or None, number of runs)."""
        if isinstance(self.init, str):
            n_init = self.n_init
            if n_init == "auto":
                n_init = 10 if self.init == "random" else 1
            return self.init, None, int(n_init)
        centres = np.asarray(self.init)
        if centres.dtype.kind != "f":
            centres = centres.astype(np.float64) if centres.dtype.kind in "iu" else centres
        centres = check_array(centres, name="init")
        if centres.shape != (self.n_clusters, n_features):
            raise ValueError(f"init has shape {centres.shape}, need (n_clusters, n_features) = "
                             f"({self.n_clusters}, {n_features})")
        if self.n_init != "auto" and self.n_init != 1:
            warnings.warn(f"Explicit initial center position passed: performing only one init in KMeans instead "
                          f"of n_init={self.n_init}.", RuntimeWarning, stacklevel=3)
        return "given", np.ascontiguousarray(centres, dtype=dtype), 1

    def _check_fitted_input(self, X: Any):
        """(X checked, the centres in X's dtype), after the fitted and feature-count checks."""
        if not hasattr(self, "cluster_centers_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                                 f"appropriate arguments before using this estimator.")
        X = check_array(X)
        n_features = shape_of(X)[1]
        if n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        _require_cuda()
        return X, np.ascontiguousarray(self.cluster_centers_, dtype=float_dtype_of(X))


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([KMGT](?:i?B)?|B)?", re.IGNORECASE)


def gpu_memory_bytes(max_gpu_memory: Any) -> int:
    """``max_gpu_memory`` in bytes for the library (0 for None: stream only what does not fit). Accepts a
    positive integer or a string with a suffix K, M, G or T (powers of 1024; optionally followed by B or
    iB), as the kmeans program's ``--max-gpu-memory`` does; raises ValueError otherwise."""
    if max_gpu_memory is None:
        return 0
    if _is_int(max_gpu_memory):
        size = int(max_gpu_memory)
    elif isinstance(max_gpu_memory, str):
        m = _SIZE.fullmatch(max_gpu_memory)
        if m is None:
            raise ValueError(f"max_gpu_memory {max_gpu_memory!r} is not a size: expected bytes with an optional "
                             f"suffix K, M, G or T (powers of 1024), e.g. '512M' or '2G'")
        number, unit = m.group(1), (m.group(2) or "B").upper()[0]
        scale = 1024 ** "BKMGT".index(unit)
        size = int(number) * scale if number.isdigit() else int(float(number) * scale)  # whole bytes, rounded down
    else:
        raise ValueError(f"max_gpu_memory must be None, a number of bytes or a size such as '2G', got "
                         f"{max_gpu_memory!r}")
    if size < 1:
        raise ValueError(f"max_gpu_memory must be at least 1 byte (or None), got {max_gpu_memory!r}")
    if size >= 1 << 64:
        raise ValueError(f"max_gpu_memory must be less than 2**64 bytes, got {max_gpu_memory!r}")
    return size


def _check_sample_weight(sample_weight: Any, n_samples: int) -> Optional[np.ndarray]:
    """None, or n_samples finite weights > 0 as float64 on the host (a scalar applies to every sample)."""
    if sample_weight is None:
        return None
    w = np.asarray(to_host(sample_weight))
    if w.dtype.kind not in "fiub":
        raise TypeError(f"sample_weight must hold numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if w.ndim == 0:
        w = np.full(n_samples, float(w))
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight has shape {w.shape}, expected ({n_samples},)")
    if not (np.isfinite(w).all() and (w > 0).all()):
        bad = int(np.flatnonzero(~(np.isfinite(w) & (w > 0)))[0])
        raise ValueError(f"sample_weight must be finite and > 0, got {w[bad]} at index {bad}")
    return np.ascontiguousarray(w)


def _device_list(devices: Any) -> Optional[List[int]]:
    """None, or the devices as a list of distinct non-negative ints (one int: a list of one)."""
    if devices is None:
        return None
    if _is_int(devices):
        devices = [devices]
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise ValueError(f"devices must be None, a device number or a sequence of them, got {devices!r}")
    out = list(devices)
    if not out:
        raise ValueError("devices must name at least one CUDA device, got an empty sequence")
    for d in out:
        if not _is_int(d) or d < 0:
            raise ValueError(f"devices must hold device numbers >= 0, got {d!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"devices lists a device twice: {out}")
    return [int(d) for d in out]


def _check_devices_exist(devices: List[int]) -> None:
    count = _skinny.cuda_device_count()
    missing = [d for d in devices if d >= count]
    if missing:
        raise ValueError(f"devices {missing} do not exist: this machine has {count} CUDA device(s), 0 .. {count - 1}")


def _require_cuda() -> None:
    require_cuda("skinny.KMeans")


def _print_iteration(iteration: int, inertia: float, shift: float, ms: float) -> None:
    print(f"Iteration {iteration}, inertia {inertia:.6e}, centre shift {shift:.3e}, {ms:.3f} ms", flush=True)
