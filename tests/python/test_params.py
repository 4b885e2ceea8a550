"""scikit-learn's estimator conventions: parameters stored unmodified, get_params/set_params, clone."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import skinny

PARAMS = {"n_clusters", "init", "n_init", "max_iter", "tol", "random_state", "backend", "column_copy", "math",
          "stop_when_stable", "max_gpu_memory", "verbose", "devices", "protect", "oversampling_factor", "init_rounds"}


def test_defaults():
    p = skinny.KMeans().get_params()
    assert set(p) == PARAMS
    assert p == {"n_clusters": 8, "init": "auto", "n_init": 1, "max_iter": 300, "tol": 1e-4,
                 "random_state": None, "backend": "auto", "column_copy": True, "math": "exact",
                 "stop_when_stable": True, "max_gpu_memory": None, "verbose": False, "devices": None,
                 "protect": False, "oversampling_factor": 2.0, "init_rounds": 5}


def test_init_stores_parameters_unmodified():
    init = np.zeros((2, 3))
    km = skinny.KMeans(2, init=init, n_init="auto", tol=-5, backend="nonsense")
    assert km.init is init and km.n_init == "auto" and km.tol == -5 and km.backend == "nonsense"


def test_set_params_returns_self_and_rejects_unknown_names():
    km = skinny.KMeans()
    assert km.set_params(n_clusters=3, backend="cublas") is km
    assert km.n_clusters == 3 and km.backend == "cublas"
    with pytest.raises(ValueError):
        km.set_params(no_such_parameter=1)


def test_sklearn_clone_keeps_parameters():
    base = pytest.importorskip("sklearn.base")
    km = skinny.KMeans(5, init="random", n_init=3, random_state=7, backend="tsm2", column_copy=False)
    copy = base.clone(km)
    assert copy is not km and copy.get_params() == km.get_params()
    init = np.ones((2, 4))
    assert base.clone(skinny.KMeans(2, init=init)).init is not init  # clone copies array parameters


def test_is_a_sklearn_clusterer_and_transformer():
    base = pytest.importorskip("sklearn.base")
    km = skinny.KMeans()
    assert isinstance(km, base.BaseEstimator)
    assert isinstance(km, base.ClusterMixin) and isinstance(km, base.TransformerMixin)


def test_works_without_scikit_learn():
    # A fresh interpreter in which importing sklearn fails: the stand-in base class must do the job.
    code = textwrap.dedent("""
        import sys
        sys.modules["sklearn"] = None
        import numpy as np, skinny
        km = skinny.KMeans(3, random_state=1)
        assert km.get_params()["n_clusters"] == 3
        assert km.set_params(n_clusters=4) is km and km.n_clusters == 4
        try:
            km.predict(np.zeros((2, 2)))
        except ValueError as e:
            assert type(e).__name__ == "NotFittedError"
        else:
            raise SystemExit("predict before fit did not raise")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
