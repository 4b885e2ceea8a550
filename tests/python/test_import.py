"""The package imports without a GPU and describes itself."""

import skinny


def test_version_is_the_cmake_project_version():
    assert skinny.__version__ == "0.1.0"


def test_device_helpers_do_not_raise_without_a_device():
    count = skinny.device_count()
    assert isinstance(count, int) and count >= 0
    assert skinny.cuda_available() == (count > 0)


def test_algorithms_come_from_the_registry():
    names = skinny.algorithms()
    assert names[0] == "auto"
    assert {"cublas", "tsm2"} <= set(names)
    assert len(names) == len(set(names))
