"""K-means on the GPU against scikit-learn's Lloyd and NumPy references. Skipped ("no CUDA device")
without a GPU; see conftest.py."""

import numpy as np
import pytest

import skinny

pytestmark = pytest.mark.gpu
sklearn_cluster = pytest.importorskip("sklearn.cluster")
sklearn_datasets = pytest.importorskip("sklearn.datasets")
from sklearn.metrics import adjusted_rand_score  # noqa: E402

DATASETS = {"iris": (sklearn_datasets.load_iris, 3), "wine": (sklearn_datasets.load_wine, 3),
            "digits": (sklearn_datasets.load_digits, 10), "breast_cancer": (sklearn_datasets.load_breast_cancer, 2)}


def dataset(name, dtype=np.float64):
    loader, k = DATASETS[name]
    return np.ascontiguousarray(loader().data, dtype=dtype), k


def sklearn_lloyd(X, init):
    """scikit-learn's Lloyd from the same centres, to its fixed point (tol = 0)."""
    return sklearn_cluster.KMeans(n_clusters=len(init), init=init, n_init=1, algorithm="lloyd", tol=0,
                                  max_iter=300).fit(X)


def not_tied(X, centres, rel=1e-9):
    """Points whose nearest and second-nearest centres differ by more than rounding."""
    d2 = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    d2.sort(axis=1)
    return d2[:, 1] - d2[:, 0] > rel * (1 + (X ** 2).sum(axis=1))


def reference_sq_distances(X, centres):
    return ((X[:, None, :].astype(np.float64) - centres[None, :, :].astype(np.float64)) ** 2).sum(axis=2)


def assert_same_clustering(ours, theirs, X):
    scale = np.abs(X).max()
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-7, atol=1e-10 * scale)
    free = not_tied(X, theirs.cluster_centers_)
    assert free.mean() > 0.95
    np.testing.assert_array_equal(ours.labels_[free], theirs.labels_[free])
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-8)


@pytest.mark.parametrize("backend", ["auto", "cublas"])
@pytest.mark.parametrize("name", list(DATASETS))
def test_matches_sklearn_lloyd_in_float64(name, backend):
    X, k = dataset(name)
    init, _ = sklearn_cluster.kmeans_plusplus(X, k, random_state=0)
    ours = skinny.KMeans(k, init=init, tol=0, max_iter=300, backend=backend).fit(X)
    theirs = sklearn_lloyd(X, init)
    assert ours.cluster_centers_.dtype == np.float64 and ours.labels_.shape == (len(X),)
    # tol = 0 stops where no label changed, in both (strict convergence)
    assert ours.n_features_in_ == X.shape[1] and ours.n_iter_ == theirs.n_iter_ < 300
    assert len(ours.iteration_ms_) == ours.n_iter_
    assert_same_clustering(ours, theirs, X)
    # Without strict convergence, every iteration runs.
    runs = ours.n_iter_ + 5
    every = skinny.KMeans(k, init=init, tol=0, max_iter=runs, backend=backend, stop_when_stable=False).fit(X)
    assert every.n_iter_ == runs and len(every.iteration_ms_) == runs
    np.testing.assert_array_equal(every.labels_, ours.labels_)


@pytest.mark.parametrize("backend", skinny.algorithms())
def test_every_backend_that_can_do_the_shape_matches_sklearn(backend):
    X, k = dataset("iris")
    init, _ = sklearn_cluster.kmeans_plusplus(X, k, random_state=1)
    try:
        ours = skinny.KMeans(k, init=init, tol=0, max_iter=100, backend=backend).fit(X)
    except ValueError as e:  # the library's can_implement refusal, translated
        pytest.skip(f"{backend} cannot do this problem: {e}")
    assert_same_clustering(ours, sklearn_lloyd(X, init), X)


def test_float32_blobs_match_sklearn_and_the_truth():
    X, truth = sklearn_datasets.make_blobs(n_samples=5000, centers=8, n_features=32, random_state=0)
    X = X.astype(np.float32)
    init, _ = sklearn_cluster.kmeans_plusplus(X, 8, random_state=0)
    ours = skinny.KMeans(8, init=init).fit(X)
    theirs = sklearn_cluster.KMeans(8, init=init, n_init=1, algorithm="lloyd").fit(X)
    assert ours.cluster_centers_.dtype == np.float32
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-4, atol=1e-4)
    assert adjusted_rand_score(truth, ours.labels_) == 1.0


@pytest.mark.parametrize("init", ["k-means++", "k-means||", "random"])
def test_library_initialisations_find_separated_blobs(init):
    X, truth = sklearn_datasets.make_blobs(n_samples=3000, centers=5, n_features=8, random_state=2)
    km = skinny.KMeans(5, init=init, n_init=5, random_state=0).fit(X)
    assert adjusted_rand_score(truth, km.labels_) == 1.0
    again = skinny.KMeans(5, init=init, n_init=5, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_, again.labels_)  # deterministic from random_state


@pytest.mark.parametrize("k, resolved, other", [(8, "k-means++", "k-means||"), (64, "k-means||", "k-means++")])
def test_auto_init_is_kmeans_plus_plus_below_64_clusters_and_kmeans_parallel_from_64(k, resolved, other):
    X, _ = sklearn_datasets.make_blobs(n_samples=4000, centers=k, n_features=8, random_state=3)
    X = X.astype(np.float32)
    fit = lambda **init: skinny.KMeans(k, random_state=0, max_iter=1, **init).fit(X).cluster_centers_
    auto = fit()  # the default
    np.testing.assert_array_equal(auto, fit(init=resolved))
    assert not np.array_equal(auto, fit(init=other))  # the two seedings differ, so the first check means something


def test_kmeans_parallel_options_reach_the_library():
    X, truth = sklearn_datasets.make_blobs(n_samples=3000, centers=40, n_features=8, random_state=3)
    X = X.astype(np.float32)

    def centres(**options):
        return skinny.KMeans(40, init="k-means||", max_iter=1, random_state=0, **options).fit(X).cluster_centers_

    default = centres()
    np.testing.assert_array_equal(default, centres(oversampling_factor=2.0, init_rounds=5))
    assert not np.array_equal(default, centres(init_rounds=1))
    assert not np.array_equal(default, centres(oversampling_factor=0.5))
    # The library checks them too: its message, not the Python layer's.
    fit = skinny._skinny.kmeans_fit
    with pytest.raises(ValueError, match=r"init_rounds = 0 must be >= 1"):
        fit(X, 2, "k-means||", None, 10, 0.0, 1, 1, "auto", True, True, "exact", None, None, init_rounds=0)


def test_n_init_keeps_the_lowest_inertia():
    X, k = dataset("digits")
    fit = skinny._skinny.kmeans_fit
    # n_init runs from the seed and seeds derived from it; the result names the seed of the run kept,
    # which alone gives the same result.
    one = fit(X, k, "random", None, 50, 1e-4, 11, 1, "auto", True, True, "exact", None, None)
    best = fit(X, k, "random", None, 50, 1e-4, 11, 5, "auto", True, True, "exact", None, None)
    assert best["inertia"] <= one["inertia"]
    again = fit(X, k, "random", None, 50, 1e-4, best["seed"], 1, "auto", True, True, "exact", None, None)
    assert again["inertia"] == best["inertia"]
    np.testing.assert_array_equal(best["labels"], again["labels"])
    # The estimator: the first run of n_init=5 is the run of n_init=1 (same random_state).
    one = skinny.KMeans(k, init="random", n_init=1, random_state=3).fit(X)
    five = skinny.KMeans(k, init="random", n_init=5, random_state=3).fit(X)
    assert five.inertia_ <= one.inertia_


@pytest.mark.parametrize("name", ["iris", "wine", "digits"])
def test_sample_weight_matches_scikit_learn(name):
    # scikit-learn's weighted Lloyd from the same centres, in float64: the same labels and centres.
    X, k = dataset(name)
    w = np.random.default_rng(0).uniform(0.2, 5.0, len(X))
    init, _ = sklearn_cluster.kmeans_plusplus(X, k, random_state=0)
    ref = sklearn_cluster.KMeans(k, init=init, n_init=1, algorithm="lloyd", max_iter=300, tol=1e-4).fit(X, sample_weight=w)
    km = skinny.KMeans(k, init=init, n_init=1, max_iter=300, tol=1e-4).fit(X, sample_weight=w)
    np.testing.assert_array_equal(ref.labels_, km.labels_)
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-9, atol=1e-9)
    assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    assert km.score(X, sample_weight=w) == pytest.approx(ref.score(X, sample_weight=w), rel=1e-9)


def test_integer_sample_weight_equals_repeated_samples():
    X, k = dataset("wine")
    w = np.random.default_rng(1).integers(1, 4, len(X))
    init, _ = sklearn_cluster.kmeans_plusplus(X, k, random_state=1)
    weighted = skinny.KMeans(k, init=init, n_init=1).fit(X, sample_weight=w)
    repeated = skinny.KMeans(k, init=init, n_init=1).fit(np.repeat(X, w, axis=0))
    np.testing.assert_array_equal(np.repeat(weighted.labels_, w), repeated.labels_)
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-10)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-10)


def test_given_init_with_n_init_warns_and_runs_once():
    X, k = dataset("iris")
    init, _ = sklearn_cluster.kmeans_plusplus(X, k, random_state=0)
    with pytest.warns(RuntimeWarning, match="only one init"):
        skinny.KMeans(k, init=init, n_init=3).fit(X)


def test_predict_transform_score_against_numpy():
    X, k = dataset("digits")
    km = skinny.KMeans(k, random_state=0).fit(X)
    C = km.cluster_centers_
    d2 = reference_sq_distances(X, C)
    scale = (X ** 2).sum(axis=1).max()
    np.testing.assert_allclose(km.transform(X) ** 2, d2, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(km.transform(X), np.sqrt(d2), rtol=1e-6, atol=1e-5)
    free = not_tied(X, C)
    np.testing.assert_array_equal(km.predict(X)[free], d2.argmin(axis=1)[free])
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    assert km.score(X) == pytest.approx(-d2.min(axis=1).sum(), rel=1e-9)
    assert km.score(X) == pytest.approx(-km.inertia_, rel=1e-9)
    # New data of the other precision: the centres follow X's dtype.
    Y = X[:100].astype(np.float32)
    assert km.predict(Y).dtype == np.int32 and km.transform(Y).dtype == np.float32
    free32 = not_tied(X[:100], C, rel=1e-4)  # float32 rounding decides closer calls
    np.testing.assert_array_equal(km.predict(Y)[free32], d2[:100].argmin(axis=1)[free32])


def test_fit_predict_and_fit_transform():
    X, k = dataset("wine")
    km = skinny.KMeans(k, random_state=0)
    labels = km.fit_predict(X)
    np.testing.assert_array_equal(labels, km.labels_)
    distances = skinny.KMeans(k, random_state=0).fit_transform(X)
    assert distances.shape == (len(X), k)
    np.testing.assert_array_equal(distances.argmin(axis=1)[not_tied(X, km.cluster_centers_)],
                                  labels[not_tied(X, km.cluster_centers_)])


def test_uniform_sample_weight_changes_nothing():
    X, k = dataset("iris")
    a = skinny.KMeans(k, random_state=0).fit(X)
    b = skinny.KMeans(k, random_state=0).fit(X, sample_weight=np.full(len(X), 2.5))
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_verbose_prints_each_iteration(capsys):
    X, k = dataset("iris")
    km = skinny.KMeans(k, random_state=0, verbose=True).fit(X)
    out = capsys.readouterr().out
    assert out.count("Iteration ") == km.n_iter_


def test_numpy_input_reports_its_copy_to_the_gpu(capsys):
    X, k = dataset("digits", np.float32)
    km = skinny.KMeans(k, random_state=0, verbose=True).fit(X)
    report = km.transfer_report_
    assert report["bytes"] == X.nbytes and report["ms"] > 0
    assert report["gbs"] == pytest.approx(X.nbytes / (report["ms"] * 1e6))
    assert "copied X to the GPU" in capsys.readouterr().out
    torch = pytest.importorskip("torch")
    on_gpu = skinny.KMeans(k, random_state=0).fit(torch.from_numpy(X).cuda())
    assert on_gpu.transfer_report_ is None  # used in place
    np.testing.assert_array_equal(on_gpu.labels_, km.labels_)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_protected_fit_sees_no_fault_and_matches_the_plain_fit(dtype):
    X, _ = sklearn_datasets.make_blobs(n_samples=5000, centers=6, n_features=12, random_state=4)
    X = X.astype(dtype)
    plain = skinny.KMeans(6, random_state=0).fit(X)
    guarded = skinny.KMeans(6, random_state=0, protect=True).fit(X)
    assert plain.protection_report_ is None
    report = guarded.protection_report_
    assert report["distance_detections"] == 0 and report["sum_detections"] == 0
    assert report["rows_verified"] >= len(X) * guarded.n_iter_ and 0 < report["max_clean_ratio"] < 1
    assert 0 <= report["rows_rechecked"] <= report["rows_verified"]
    np.testing.assert_array_equal(guarded.labels_, plain.labels_)
    with pytest.raises(ValueError, match="protect"):  # streamed fits are not protected yet
        skinny.KMeans(6, protect=True, max_gpu_memory="1M").fit(X)


def test_non_uniform_float_dtypes_are_converted():
    X, k = dataset("iris")
    km = skinny.KMeans(k, random_state=0).fit(X.astype(np.float16))
    assert km.cluster_centers_.dtype == np.float32


def test_backend_that_cannot_do_the_shape_is_a_value_error_with_the_reason():
    X, k = dataset("iris")
    with pytest.raises(ValueError, match="wmma"):
        skinny.KMeans(k, backend="wmma").fit(X)  # tensor-core WMMA takes half inputs, not float64


def test_out_of_device_memory_is_memory_error():
    km = skinny.KMeans(1 << 17)
    km.cluster_centers_ = np.zeros((1 << 17, 1))
    km.n_features_in_ = 1
    with pytest.raises(MemoryError, match="cudaErrorMemoryAllocation"):
        km.transform(np.zeros((1 << 20, 1)))  # 2^37 distances: 1 TiB
    X, k = dataset("iris")  # and the device still works afterwards
    skinny.KMeans(k, random_state=0).fit(X)


# ------------------------------------------------------------------ streamed from host memory (fit_host)

@pytest.mark.parametrize("k, same_bits", [(8, False), (128, True)])
def test_streamed_fit_equals_the_in_memory_fit(tmp_path, k, same_bits):
    # 200000 x 32 float32 (25.6 MB) through 96 MiB of GPU memory: a few chunks. k = 128 runs the fused
    # assignment (the same bits under any chunking); k = 8 the GEMM path (the same labels, centres within
    # rounding). Random initial centres: the same rows in both fits. A read-only memmap streams in place.
    X, _ = sklearn_datasets.make_blobs(n_samples=200000, n_features=32, centers=k, random_state=1)
    X = np.ascontiguousarray(X, dtype=np.float32)
    np.save(tmp_path / "x.npy", X)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    # Without the column-major copy: the streamed chunks read rows, and the GEMM path gives the same
    # bits only for the same GEMMs.
    ref = skinny.KMeans(k, init="random", random_state=0, column_copy=False).fit(X)
    assert ref.stream_report_ is None and ref.transfer_report_["bytes"] == X.nbytes
    km = skinny.KMeans(k, init="random", random_state=0, max_gpu_memory="96M").fit(mapped)
    report = km.stream_report_
    assert report is not None and report["chunks"] > 1, report
    assert km.transfer_report_ is None  # the copies are in the stream report
    assert report["budget_bytes"] <= 96 << 20 and report["planned_bytes"] <= report["budget_bytes"]
    if same_bits:
        np.testing.assert_array_equal(km.labels_, ref.labels_)
        np.testing.assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
        assert km.n_iter_ == ref.n_iter_
        assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    else:
        # The GEMM path runs other GEMM shapes on chunks, and TSM2's timed trial may pick other kernels for
        # them (other roundings): a point at a near-tie can flip, and the run follow a nearby path.
        assert adjusted_rand_score(ref.labels_, km.labels_) > 0.999
        assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-6)
    assert len(report["h2d_gbs"]) == km.n_iter_ and min(report["h2d_gbs"]) > 0
    assert report["h2d_bytes_per_iteration"] == X.nbytes


def test_streamed_fit_with_weights_and_restarts(tmp_path):
    X, _ = sklearn_datasets.make_blobs(n_samples=60000, n_features=16, centers=5, random_state=2)
    X = np.ascontiguousarray(X, dtype=np.float64)
    w = np.random.RandomState(0).uniform(0.5, 2.0, len(X))
    ref = skinny.KMeans(5, init="random", n_init=3, random_state=4).fit(X, sample_weight=w)
    km = skinny.KMeans(5, init="random", n_init=3, random_state=4, max_gpu_memory=80 << 20).fit(X, sample_weight=w)
    assert km.stream_report_["chunks"] > 1
    np.testing.assert_array_equal(km.labels_, ref.labels_)
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-12, atol=1e-12 * np.abs(X).max())


def test_too_small_max_gpu_memory_is_a_value_error_naming_it():
    X, k = dataset("iris")
    with pytest.raises(ValueError, match=r"budget of 1.0 MiB .*cannot hold one chunk"):
        skinny.KMeans(k, max_gpu_memory="1M").fit(X)


# ------------------------------------------------------------------------ device arrays (no copies)

def _same_as_numpy(X_device, X_host, k=10):
    ref = skinny.KMeans(k, random_state=0).fit(X_host)
    dev = skinny.KMeans(k, random_state=0).fit(X_device)
    np.testing.assert_array_equal(dev.labels_, ref.labels_)
    np.testing.assert_array_equal(dev.cluster_centers_, ref.cluster_centers_)
    assert dev.inertia_ == ref.inertia_
    assert isinstance(dev.labels_, np.ndarray) and isinstance(dev.cluster_centers_, np.ndarray)
    np.testing.assert_array_equal(dev.predict(X_device), ref.predict(X_host))
    np.testing.assert_array_equal(dev.transform(X_device), ref.transform(X_host))
    assert dev.score(X_device) == ref.score(X_host)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cupy_input_gives_the_numpy_result(dtype):
    cupy = pytest.importorskip("cupy")
    X, k = dataset("digits", dtype)
    _same_as_numpy(cupy.asarray(X), X, k)
    _same_as_numpy(cupy.asfortranarray(cupy.asarray(X)), X, k)  # converted on the device


def test_cupy_float16_and_non_finite():
    cupy = pytest.importorskip("cupy")
    X, k = dataset("iris")
    X16 = X.astype(np.float16)
    _same_as_numpy(cupy.asarray(X16), X16, k)
    bad = cupy.asarray(X)
    bad[3, 2] = cupy.nan
    with pytest.raises(ValueError, match="NaN"):
        skinny.KMeans(k).fit(bad)
    with pytest.raises(TypeError):
        skinny.KMeans(k).fit(cupy.ones((10, 2), dtype=cupy.int32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_cuda_input_gives_the_numpy_result(dtype):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    X, k = dataset("digits", np.dtype(dtype))
    _same_as_numpy(torch.from_numpy(X).cuda(), X, k)
    _same_as_numpy(torch.from_numpy(X).cuda().t().contiguous().t(), X, k)  # column-major: converted
    bad = torch.from_numpy(X).cuda()
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="infinity"):
        skinny.KMeans(k).fit(bad)


@pytest.mark.parametrize("math", ["exact", "fast"])
def test_float16_data_fits_like_its_float32_values(math):
    X, k = dataset("digits")
    X16 = (X / 16.0).astype(np.float16)
    X32 = X16.astype(np.float32)  # the same values
    init, _ = sklearn_cluster.kmeans_plusplus(X32, k, random_state=0)
    half = skinny.KMeans(k, init=init, math=math).fit(X16)
    single = skinny.KMeans(k, init=init, math=math).fit(X32)
    assert half.cluster_centers_.dtype == np.float32
    np.testing.assert_array_equal(half.labels_, single.labels_)
    np.testing.assert_allclose(half.cluster_centers_, single.cluster_centers_, rtol=1e-6, atol=1e-6)
    assert half.inertia_ == pytest.approx(single.inertia_, rel=1e-6)
    np.testing.assert_array_equal(half.predict(X16), single.labels_)


def test_torch_bfloat16_tensors_fit_on_the_gpu():
    torch = pytest.importorskip("torch")
    X, k = dataset("digits")
    xb = torch.tensor(X / 16.0, dtype=torch.bfloat16, device="cuda")
    x32 = xb.float().cpu().numpy()
    init, _ = sklearn_cluster.kmeans_plusplus(x32, k, random_state=0)
    a = skinny.KMeans(k, init=init).fit(xb)
    b = skinny.KMeans(k, init=init).fit(x32)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("devices", [0, [0]])
def test_one_device_in_devices_gives_the_one_gpu_result(dtype, devices):
    X, _ = sklearn_datasets.make_blobs(n_samples=3000, centers=5, n_features=9, random_state=2)
    X = X.astype(dtype)
    w = np.random.RandomState(1).uniform(0.5, 2.0, len(X))
    for init in ("k-means++", "random", X[:5]):
        plain = skinny.KMeans(5, init=init, random_state=4).fit(X, sample_weight=w)
        multi = skinny.KMeans(5, init=init, random_state=4, devices=devices).fit(X, sample_weight=w)
        np.testing.assert_array_equal(multi.labels_, plain.labels_)
        np.testing.assert_array_equal(multi.cluster_centers_, plain.cluster_centers_)
        assert multi.n_iter_ == plain.n_iter_
        assert multi.inertia_ == pytest.approx(plain.inertia_, rel=1e-12)
        assert len(multi.allreduce_ms_) == multi.n_iter_


@pytest.mark.gpu
def test_several_devices_give_the_one_device_result():
    n = skinny.device_count()
    if n < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {n}")
    X, _ = sklearn_datasets.make_blobs(n_samples=20000, centers=200, n_features=32, random_state=3)
    X = X.astype(np.float32)
    one = skinny.KMeans(200, init="random", random_state=1, max_iter=20, devices=[0]).fit(X)
    for count in sorted({2, n}):
        many = skinny.KMeans(200, init="random", random_state=1, max_iter=20, devices=list(range(count))).fit(X)
        np.testing.assert_array_equal(many.labels_, one.labels_)
        np.testing.assert_array_equal(many.cluster_centers_, one.cluster_centers_)
        assert many.inertia_ == one.inertia_


@pytest.mark.gpu
def test_devices_that_do_not_exist_are_value_errors():
    with pytest.raises(ValueError, match="do not exist"):
        skinny.KMeans(2, devices=[skinny.device_count()]).fit(np.random.rand(10, 2))
