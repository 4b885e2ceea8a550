"""The host model of exact mode's re-check (bench/exact_recheck_model.py): its roundings, and its verdicts on
data whose answer is known."""
import numpy as np


def test_tf32_and_bfloat16_roundings(recheck_model):
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -12, -1 - 2.0 ** -10 - 2.0 ** -13], dtype=np.float32)
    # TF32 keeps 10 significand bits: 2^-10 steps at 1; truncation drops the rest, rounding ties to even.
    assert recheck_model.tf32_truncated(x).tolist() == [1.0, 1 + 2.0 ** -10, 1.0, -1 - 2.0 ** -10]
    assert recheck_model.tf32_rounded(x).tolist() == [1.0, 1 + 2.0 ** -9, 1.0, -1 - 2.0 ** -10]
    b = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8], dtype=np.float32)  # bfloat16: 7 bits, ties to even
    assert recheck_model.bf16_rounded(b).tolist() == [1.0, 1 + 2.0 ** -6]


def test_twin_centres_leave_every_point_as_a_near_tie(recheck_model):
    rng = np.random.default_rng(3)
    c = rng.uniform(-1, 1, size=(8, 16)).astype(np.float32)
    c = np.concatenate([c, c])  # every centre has an identical twin: the best two distances are equal
    x = rng.uniform(-1, 1, size=(500, 16)).astype(np.float32)
    r = recheck_model.model(x, c, "float32", [4])
    assert r["rechecked_share"] == 1.0 and r["near_tie_share"] == 1.0
    assert r["window_median"] >= 2  # the twin is in the window


def test_far_apart_centres_certify_every_point(recheck_model):
    rng = np.random.default_rng(4)
    c = (10 * np.eye(6, 12)).astype(np.float32)  # centres 14 apart, points within 0.1 of one
    x = (c[rng.integers(6, size=400)] + 0.1 * rng.uniform(-1, 1, size=(400, 12))).astype(np.float32)
    for dtype in ("float32", "float16", "bfloat16"):
        r = recheck_model.model(recheck_model.rounded_to(x, dtype), c, dtype, [4])
        assert r["rechecked_share"] == 0.0 and r["near_tie_share"] == 0.0, dtype
        assert "window_median" not in r
