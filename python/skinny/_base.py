"""The estimator base: scikit-learn's when it is installed (so clone, pipelines and grid search work),
else a small stand-in with the same get_params/set_params contract. scikit-learn stays optional."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
    from sklearn.exceptions import NotFittedError
    from sklearn.utils import check_random_state

    HAVE_SKLEARN = True
except ImportError:  # pragma: no cover - exercised only without scikit-learn
    HAVE_SKLEARN = False

    class NotFittedError(ValueError, AttributeError):
        """Raised when an estimator is used before fit (scikit-learn's class of the same name)."""

    class BaseEstimator:
        """get_params/set_params from the parameters of __init__, as scikit-learn's BaseEstimator."""

        @classmethod
        def _get_param_names(cls) -> list[str]:
            sig = inspect.signature(cls.__init__)
            return sorted(p.name for p in sig.parameters.values()
                          if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params: Any):
            valid = self._get_param_names()
            for name, value in params.items():
                if name not in valid:
                    raise ValueError(f"Invalid parameter {name!r} for estimator {type(self).__name__}. "
                                     f"Valid parameters are: {valid!r}.")
                setattr(self, name, value)
            return self

        def __repr__(self) -> str:
            args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
            return f"{type(self).__name__}({args})"

    class ClusterMixin:
        _estimator_type = "clusterer"

    class TransformerMixin:
        pass

    def check_random_state(seed):
        if seed is None or seed is np.random:
            return np.random.mtrand._rand
        if isinstance(seed, (int, np.integer)):
            return np.random.RandomState(seed)
        if isinstance(seed, np.random.RandomState):
            return seed
        raise ValueError(f"{seed!r} cannot be used to seed a numpy.random.RandomState instance")


__all__ = ["BaseEstimator", "ClusterMixin", "TransformerMixin", "NotFittedError", "check_random_state",
           "HAVE_SKLEARN"]
