"""GPU tests carry @pytest.mark.gpu and are skipped, with the reason, when no CUDA device is visible.
The CPU tests (import, parameters, validation) always run, so a session never collects nothing."""

import importlib.util
from pathlib import Path

import pytest

import skinny


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped with the reason when there is none)")


def pytest_collection_modifyitems(config, items):
    if skinny.cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    # Exit status 5 (no tests collected) would let a broken selection pass CI unnoticed.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _bench_script(name: str):
    """bench/NAME.py as a module."""
    path = Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def bench():
    """bench/kmeans_bench.py as a module (it imports no torch or CUDA at the top: loads anywhere)."""
    return _bench_script("kmeans_bench")


@pytest.fixture(scope="session")
def recheck_model():
    """bench/exact_recheck_model.py (NumPy only) as a module."""
    return _bench_script("exact_recheck_model")
