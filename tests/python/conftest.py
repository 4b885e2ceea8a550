"""GPU tests carry @pytest.mark.gpu and are skipped, with the reason, when no CUDA device is visible.
The CPU tests (import, parameters, validation) always run, so a session never collects nothing."""

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
