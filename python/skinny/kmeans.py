"""skinny.KMeans: Lloyd K-means on the GPU with scikit-learn's estimator interface."""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Optional, Union

import numpy as np

from . import _skinny
from ._arrays import check_array, float_dtype_of, shape_of, to_host
from ._base import BaseEstimator, ClusterMixin, NotFittedError, TransformerMixin, check_random_state

_INITS = ("k-means++", "k-means||", "random")


class KMeans(ClusterMixin, TransformerMixin, BaseEstimator):
    """Lloyd K-means on an NVIDIA GPU, the distances' cross term through skinny's GEMM backends.

    Follows ``sklearn.cluster.KMeans(algorithm="lloyd")``: the same parameters where they apply, the same
    convergence test (the sum of squared centre shifts <= ``tol`` times the mean feature variance), the
    same fitted attributes, and a final assignment to the returned centres.

    Parameters
    ----------
    n_clusters : int, default 8
        Number of clusters, 1 <= n_clusters <= n_samples.
    init : {"k-means++", "k-means||", "random"} or array of shape (n_clusters, n_features), default "k-means++"
        Initial centres: k-means++ seeding, k-means|| (scalable k-means++, cuML's default: a few rounds
        that each sample about 2 x n_clusters points at once, then reduced to n_clusters, instead of a
        pass over the data per centre) or k distinct random samples (all on the GPU, from a seed drawn
        from ``random_state``), or the given centres.
    n_init : int or "auto", default 1
        Runs with different seeds; the one with the lowest inertia is kept. "auto": 10 for
        ``init="random"``, 1 otherwise (scikit-learn's rule). Given centres run once.
    max_iter : int, default 300
        Lloyd iterations at most per run.
    tol : float, default 1e-4
        Relative tolerance of the convergence test; 0 runs all ``max_iter`` iterations.
    random_state : None, int or numpy.random.RandomState, default None
        Draws the seed of each run.
    backend : str, default "auto"
        GEMM for the distances: one of :func:`skinny.algorithms` or "auto".
    column_copy : bool, default True
        Let the library keep a column-major copy of X on the GPU for the distance GEMM (faster for
        n_samples >= 65536 on the tall-skinny kernels; costs one more X of device memory).
    verbose : bool, default False
        Print one line per iteration.

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features), dtype of X
    labels_ : ndarray (n_samples,), int32
    inertia_ : float
        Sum of squared distances of the samples to their closest centre.
    n_iter_ : int
    n_features_in_ : int
    iteration_ms_ : ndarray (n_iter_,)
        GPU time of each Lloyd iteration of the kept run, in milliseconds (not in scikit-learn).

    Notes
    -----
    X may be a NumPy array (copied to the GPU) or a CUDA array (CuPy, PyTorch; used in place when it is
    C-contiguous float32/float64). Results are NumPy arrays. Weighted samples are not supported.
    """

    def __init__(self, n_clusters: int = 8, *, init: Union[str, Any] = "k-means++",
                 n_init: Union[int, str] = 1, max_iter: int = 300, tol: float = 1e-4,
                 random_state: Optional[Union[int, np.random.RandomState]] = None, backend: str = "auto",
                 column_copy: bool = True, verbose: bool = False) -> None:
        # Stored unmodified (scikit-learn's rule): checks happen in fit.
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.backend = backend
        self.column_copy = column_copy
        self.verbose = verbose

    # ----------------------------------------------------------------------------------------- fitting

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> "KMeans":
        """Clusters X (n_samples x n_features). ``y`` is ignored. Returns self."""
        self._check_params()
        X = check_array(X)
        n_samples, n_features = shape_of(X)
        if self.n_clusters > n_samples:
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}.")
        _check_uniform_weights(sample_weight, n_samples)
        dtype = float_dtype_of(X)
        init, centres, n_init = self._initial_centres(n_features, dtype)
        seeds = check_random_state(self.random_state).randint(np.iinfo(np.int32).max, size=n_init)
        _require_cuda()

        result = _skinny.kmeans_fit(X, int(self.n_clusters), init, centres, int(self.max_iter), float(self.tol),
                                    [int(s) for s in seeds], self.backend, bool(self.column_copy),
                                    _print_iteration if self.verbose else None)
        self.cluster_centers_ = result["cluster_centers"]
        self.labels_ = result["labels"]
        self.inertia_ = float(result["inertia"])
        self.n_iter_ = int(result["n_iter"])
        self.n_features_in_ = int(n_features)
        self.iteration_ms_ = np.asarray(result["iteration_ms"], dtype=np.float64)
        if self.verbose:
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
        return _skinny.kmeans_predict(X, centres, self.backend)

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distances (n_samples x n_clusters) of the samples to the centres."""
        X, centres = self._check_fitted_input(X)
        return np.sqrt(_skinny.kmeans_sq_distances(X, centres, self.backend))

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Opposite of the inertia of X for the fitted centres (higher is better, as in scikit-learn)."""
        X, centres = self._check_fitted_input(X)
        _check_uniform_weights(sample_weight, shape_of(X)[0])
        sq = _skinny.kmeans_sq_distances(X, centres, self.backend)
        return -float(sq.min(axis=1).sum(dtype=np.float64))

    # --------------------------------------------------------------------------------------- checking

    def _check_params(self) -> None:
        """Every parameter, before any data or GPU work."""
        if not _is_int(self.n_clusters) or self.n_clusters < 1:
            raise ValueError(f"n_clusters must be an integer >= 1, got {self.n_clusters!r}")
        if isinstance(self.init, str):
            if self.init not in _INITS:
                raise ValueError(f"init must be 'k-means++', 'k-means||', 'random' or an array of shape "
                                 f"(n_clusters, n_features), got {self.init!r}")
        if not (self.n_init == "auto" or (_is_int(self.n_init) and self.n_init >= 1)):
            raise ValueError(f"n_init must be an integer >= 1 or 'auto', got {self.n_init!r}")
        if not _is_int(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}")
        if (not isinstance(self.tol, numbers.Real) or isinstance(self.tol, bool) or not np.isfinite(self.tol)
                or self.tol < 0):
            raise ValueError(f"tol must be a finite number >= 0, got {self.tol!r}")
        names = _skinny.algo_names()
        if self.backend not in names:
            raise ValueError(f"unknown backend {self.backend!r}; valid backends: {', '.join(names)}")

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


def _check_uniform_weights(sample_weight: Any, n_samples: int) -> None:
    """None or equal weights (which do not change Lloyd's result); anything else is refused."""
    if sample_weight is None:
        return
    w = np.asarray(to_host(sample_weight), dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n_samples, float(w))
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight has shape {w.shape}, expected ({n_samples},)")
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("sample_weight must be finite and > 0")
    if not (w == w[0]).all():
        raise NotImplementedError("skinny.KMeans does not support non-uniform sample_weight: the GPU library "
                                  "has no weighted update. Use sklearn.cluster.KMeans for weighted samples.")


def _require_cuda() -> None:
    if _skinny.cuda_device_count() == 0:
        raise RuntimeError("skinny.KMeans needs a CUDA device and none is visible (no GPU, no driver, or "
                           "CUDA_VISIBLE_DEVICES hides them)")


def _print_iteration(iteration: int, inertia: float, shift: float, ms: float) -> None:
    print(f"Iteration {iteration}, inertia {inertia:.6e}, centre shift {shift:.3e}, {ms:.3f} ms", flush=True)
