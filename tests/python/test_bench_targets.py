"""bench/kmeans_bench.py's issue-20 targets (CPU): counted from the rows of a run, shape by shape."""

import math

import pytest


def run(d, dtype, impl, mode, ms, inertia=1.0, status="ok"):
    return {"n": 1024, "d": d, "k": 16, "dtype": dtype, "impl": impl, "mode": mode, "status": status,
            "ms_per_iter": ms, "inertia": inertia}


def test_each_criterion_is_counted_per_shape(bench):
    rows = [
        # float32, d = 2: fast 0.5x flash (within 0.6), exact 0.8x (within 0.9), inertias 5e-6 apart.
        run(2, "float32", "skinny", "fast", 1.0, 1.000005), run(2, "float32", "skinny", "exact", 1.6, 1.0),
        run(2, "float32", "flash", "any", 2.0), run(2, "float32", "torch", "fast", 0.9),
        run(2, "float32", "torch", "exact", 3.0),
        # float16, d = 16: fast 0.7x (not within), exact 1.0x (not within), inertias 2e-5 apart; PyTorch's
        # one run ("any") is faster than exact mode.
        run(16, "float16", "skinny", "fast", 1.4, 1.00002), run(16, "float16", "skinny", "exact", 2.0, 1.0),
        run(16, "float16", "flash", "any", 2.0), run(16, "float16", "torch", "any", 1.9),
        # d = 128: flash-kmeans failed, so the shape is not compared with it; PyTorch still is.
        run(128, "float32", "skinny", "fast", 1.0), run(128, "float32", "skinny", "exact", 1.0),
        run(128, "float32", "flash", "any", 0.0, status="error"), run(128, "float32", "torch", "fast", 2.0),
    ]
    t = bench.grid_targets(rows)
    assert t["shapes"] == 2
    assert t["fast_within_0.6"] == 1 and t["exact_within_0.9"] == 1
    assert t["inertia_within_1e-5"] == 1
    assert t["fast_geomean"] == pytest.approx(math.sqrt(0.5 * 0.7))
    assert t["exact_geomean"] == pytest.approx(math.sqrt(0.8 * 1.0))
    slower = {(s["d"], s["dtype"], s["mode"]): s["ratio"] for s in t["slower_than_torch"]}
    assert slower == pytest.approx({(2, "float32", "fast"): 1.0 / 0.9, (16, "float16", "exact"): 2.0 / 1.9})


def test_fast_labels_are_counted_at_their_own_centres(bench, capsys):
    """label_excess (the inertia of fast mode's own labels over the best at its centres, minus 1) is counted
    where the fast row carries it, apart from the two modes' end-of-run inertias."""
    def shape(d, fast_inertia, excess):
        fast = run(d, "float32", "skinny", "fast", 1.0, fast_inertia)
        if excess is not None:
            fast["label_excess"] = excess
        return [fast, run(d, "float32", "skinny", "exact", 1.6, 1.0), run(d, "float32", "flash", "any", 2.0)]

    # d = 2: the trajectories parted (3e-3 apart) but the labels are within 1e-5 at their centres;
    # d = 16: labels 2e-5 worse; d = 128: no label check in the row.
    t = bench.grid_targets(shape(2, 1.003, 4e-7) + shape(16, 1.0, 2e-5) + shape(128, 1.0, None))
    assert t["shapes"] == 3 and t["inertia_within_1e-5"] == 2
    assert t["labels_checked"] == 2 and t["labels_within_1e-5"] == 1
    bench.print_targets(t)
    assert "fast labels within 1e-5 of the best at their centres on 1 of 2" in capsys.readouterr().out


def test_a_run_without_comparable_shapes_prints_nothing(bench, capsys):
    t = bench.grid_targets([run(2, "float32", "skinny", "fast", 1.0, status="skipped")])
    assert t["shapes"] == 0 and t["fast_geomean"] is None and t["slower_than_torch"] == []
    bench.print_targets(t)
    assert capsys.readouterr().out == ""
