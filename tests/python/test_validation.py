"""Every input and parameter error, each with its one exception. All of these are raised before any
CUDA call, so they run (and must pass) on machines without a GPU."""

import re

import numpy as np
import pytest

import skinny
from skinny._base import NotFittedError

X = np.random.RandomState(0).rand(20, 3)


def fitted(n_features=3, k=2, dtype=np.float64):
    """An estimator that looks fitted, without running fit (no GPU needed)."""
    km = skinny.KMeans(k)
    km.cluster_centers_ = np.zeros((k, n_features), dtype=dtype)
    km.labels_ = np.zeros(20, dtype=np.int32)
    km.n_features_in_ = n_features
    return km


@pytest.mark.parametrize("bad", [np.zeros(5), np.zeros((2, 3, 4)), np.float64(1.0)])
def test_wrong_ndim(bad):
    with pytest.raises(ValueError, match="2-D"):
        skinny.KMeans(1).fit(bad)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_empty(shape):
    with pytest.raises(ValueError, match="empty"):
        skinny.KMeans(1).fit(np.zeros(shape))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, bool, np.complex64, np.complex128, object])
def test_non_float_dtypes_are_type_errors(dtype):
    with pytest.raises(TypeError, match="float32 or float64"):
        skinny.KMeans(2).fit(np.ones((4, 2), dtype=dtype))


def test_strings_are_type_errors():
    with pytest.raises(TypeError):
        skinny.KMeans(2).fit([["a", "b"], ["c", "d"]])


@pytest.mark.parametrize("value, what", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")])
def test_non_finite(value, what):
    bad = X.copy()
    bad[7, 1] = value
    with pytest.raises(ValueError, match=what):
        skinny.KMeans(2).fit(bad)
    with pytest.raises(ValueError, match=what):
        skinny.KMeans(2).fit(bad.astype(np.float32))


def test_non_finite_in_predict():
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fitted().predict(bad)


def test_more_clusters_than_samples():
    with pytest.raises(ValueError, match="n_samples=20 should be >= n_clusters=21"):
        skinny.KMeans(21).fit(X)


def test_unknown_backend_lists_the_registry_names():
    with pytest.raises(ValueError) as e:
        skinny.KMeans(2, backend="fastest").fit(X)
    message = str(e.value)
    assert "'fastest'" in message
    for name in skinny.algorithms():
        assert re.search(rf"\b{re.escape(name)}\b", message), name


@pytest.mark.parametrize("params", [
    {"n_clusters": 0}, {"n_clusters": -3}, {"n_clusters": 2.5}, {"n_clusters": "2"}, {"n_clusters": True},
    {"init": "kmeans||"}, {"n_init": 0}, {"n_init": "many"}, {"max_iter": 0}, {"max_iter": 1.5},
    {"tol": -1e-3}, {"tol": float("nan")}, {"tol": float("inf")}, {"tol": "small"},
    {"oversampling_factor": 0}, {"oversampling_factor": -2.0}, {"oversampling_factor": float("nan")},
    {"oversampling_factor": True}, {"oversampling_factor": "2"}, {"init_rounds": 0}, {"init_rounds": 1.5},
])
def test_bad_parameters(params):
    with pytest.raises(ValueError):
        skinny.KMeans(**{"n_clusters": 2, **params}).fit(X)


@pytest.mark.parametrize("init", ["auto", "k-means++", "k-means||", "random"])
def test_library_initialisations_pass_the_checks(init):
    skinny.KMeans(2, init=init)._check_params()  # raises ValueError for an unknown name ("kmeans||" above)


def test_given_init_must_be_n_clusters_by_n_features():
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        skinny.KMeans(2, init=np.zeros((3, 3))).fit(X)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        skinny.KMeans(2, init=np.zeros((2, 2))).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        skinny.KMeans(2, init=np.array([[0, 0, np.nan], [1, 1, 1]])).fit(X)


def test_predict_before_fit_is_not_fitted_error():
    for method in ("predict", "transform", "score"):
        with pytest.raises(NotFittedError) as e:
            getattr(skinny.KMeans(2), method)(X)
        assert isinstance(e.value, ValueError)
    sklearn_exceptions = pytest.importorskip("sklearn.exceptions")
    assert NotFittedError is sklearn_exceptions.NotFittedError


@pytest.mark.parametrize("method", ["predict", "transform", "score"])
def test_feature_count_mismatch(method):
    with pytest.raises(ValueError, match="X has 4 features, but KMeans is expecting 3 features"):
        getattr(fitted(), method)(np.zeros((5, 4)))


def test_sample_weight_of_strings_is_a_type_error():
    with pytest.raises(TypeError, match="sample_weight must hold numbers"):
        skinny.KMeans(2).fit(X, sample_weight=np.array(["a"] * 20))


def test_float16_stays_float16_for_kmeans_and_becomes_float32_elsewhere():
    from skinny._arrays import check_array
    x16 = np.ones((3, 2), dtype=np.float16)
    assert check_array(x16, sixteen_bit=True).dtype == np.float16
    assert check_array(x16).dtype == np.float32
    with pytest.raises(ValueError, match="NaN"):
        check_array(np.array([[1, np.nan]], dtype=np.float16), sixteen_bit=True)


def test_unknown_math_is_refused():
    with pytest.raises(ValueError, match="math must be 'exact' or 'fast'"):
        skinny.KMeans(2, math="tf32").fit(X)


def test_stop_when_stable_must_be_a_bool():
    with pytest.raises(ValueError, match="stop_when_stable"):
        skinny.KMeans(2, stop_when_stable="yes").fit(X)


def test_protect_must_be_a_bool_and_runs_on_one_device():
    with pytest.raises(ValueError, match="protect must be True or False"):
        skinny.KMeans(2, protect=1).fit(X)
    with pytest.raises(ValueError, match="protect runs on one device"):
        skinny.KMeans(2, protect=True, devices=[0]).fit(X)


@pytest.mark.parametrize("weights", [np.ones(19), np.ones((20, 1)), -np.ones(20), np.full(20, np.nan), np.zeros(20)])
def test_malformed_sample_weight(weights):
    with pytest.raises(ValueError, match="sample_weight"):
        skinny.KMeans(2).fit(X, sample_weight=weights)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2X", "0", "0.4", "2 G", "", "G", "-1G", 1 << 64, [1]])
def test_bad_max_gpu_memory_is_refused_before_any_gpu_work(bad):
    with pytest.raises(ValueError, match="max_gpu_memory"):
        skinny.KMeans(2, max_gpu_memory=bad).fit(X)


@pytest.mark.parametrize("size, expected", [
    (None, 0), (1, 1), (1 << 30, 1 << 30), ("2G", 2 << 30), ("2gib", 2 << 30), ("512M", 512 << 20),
    ("512MB", 512 << 20), ("1.5G", 3 << 29), (".5K", 512), ("100", 100), ("512B", 512), ("1T", 1 << 40),
    ("18446744073709551615", (1 << 64) - 1),
])
def test_max_gpu_memory_sizes(size, expected):
    from skinny.kmeans import gpu_memory_bytes
    assert gpu_memory_bytes(size) == expected
    skinny.KMeans(2, max_gpu_memory=size)._check_params()


def test_max_gpu_memory_messages_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"max_gpu_memory '2X' is not a size: expected bytes with an optional suffix K, "
                                         r"M, G or T \(powers of 1024\)"):
        skinny.KMeans(2, max_gpu_memory="2X").fit(X)
    with pytest.raises(ValueError, match="max_gpu_memory must be at least 1 byte"):
        skinny.KMeans(2, max_gpu_memory=0).fit(X)


def test_library_errors_translate_to_python_exceptions():
    # std::invalid_argument from the C++ library arrives as ValueError with the library's message.
    with pytest.raises(ValueError, match="unknown GEMM algorithm 'bogus'"):
        skinny._skinny.kmeans_fit(X, 2, "random", None, 10, 0.0, 1, 1, "bogus", True, True, "exact", None, None)
    with pytest.raises(ValueError, match="unknown math 'tf32'"):
        skinny._skinny.kmeans_fit(X, 2, "random", None, 10, 0.0, 1, 1, "auto", True, True, "tf32", None, None)
    with pytest.raises(ValueError, match=r"unknown init 'kmeans\|\|' \(valid: auto, k-means\+\+, k-means\|\|, random"):
        skinny._skinny.kmeans_fit(X, 2, "kmeans||", None, 10, 0.0, 1, 1, "auto", True, True, "exact", None, None)


@pytest.mark.skipif(skinny.cuda_available(), reason="checks the behaviour without a CUDA device")
def test_without_a_device_work_raises_runtime_error():
    with pytest.raises(RuntimeError, match="CUDA device"):
        skinny.KMeans(2).fit(X)
    with pytest.raises(RuntimeError, match="CUDA device"):
        fitted().predict(X)
    # The library's own CUDA error (past the Python checks) is a RuntimeError with its message.
    with pytest.raises(RuntimeError, match="CUDA error"):
        skinny._skinny.kmeans_fit(X, 2, "random", None, 10, 0.0, 1, 1, "auto", True, True, "exact", None, None)


def test_gemm_refuses_host_arrays_and_unknown_algorithms():
    a = np.ones((4, 3), dtype=np.float32)
    with pytest.raises(TypeError, match="CUDA array"):
        skinny.gemm(a, a.T.copy())
    with pytest.raises(ValueError, match="valid algorithms: auto, cublas"):
        skinny.gemm(a, a.T.copy(), algo="fastest")


@pytest.mark.parametrize("devices, match", [([], "at least one"), ([0, 0], "twice"), ([-1], ">= 0"),
                                            (["0"], ">= 0"), ([0.5], ">= 0"), ("0", "sequence"),
                                            (1.5, "sequence"), ([True], ">= 0")])
def test_bad_devices_are_value_errors_before_any_gpu_work(devices, match):
    with pytest.raises(ValueError, match=match):
        skinny.KMeans(2, devices=devices).fit(X)
