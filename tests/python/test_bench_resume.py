"""bench/kmeans_bench.py --resume (CPU): which shapes an earlier run's JSON carries over, and the dry run's
account of them. The module imports no torch or CUDA at the top, so this runs anywhere."""

import json

import pytest

# The runs planned for float32 data: skinny's two modes, flash-kmeans, and the PyTorch Lloyd in both modes.
FLOAT32_RUNS = [("skinny", "exact"), ("skinny", "fast"), ("flash", "any"), ("torch", "exact"), ("torch", "fast")]


def rows(n, d, k, statuses):
    return [{"n": n, "d": d, "k": k, "dtype": "float32", "impl": i, "mode": m, "status": s}
            for (i, m), s in zip(FLOAT32_RUNS, statuses)]


def earlier_run(tmp_path, commit="abc1234"):
    doc = {"meta": {"git_commit": commit},
           "rows": rows(1024, 16, 2, ["ok"] * 5)                          # finished
           + rows(1024, 16, 16, ["ok", "ok", "error", "ok", "ok"])        # a failed run: runs again
           + rows(1024, 128, 2, ["skipped"] * 5)                          # skipped by the budget: runs
           + rows(1024, 128, 16, ["ok", "ok"])}                           # skinny's runs alone: runs
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps(doc))
    return path


def test_only_shapes_whose_every_run_ended_ok_are_finished(bench, tmp_path):
    commit, done = bench.finished_shapes(str(earlier_run(tmp_path)))
    assert commit == "abc1234"
    assert set(done) == {(1024, 16, 2, "float32"), (1024, 128, 16, "float32")}


def test_a_shape_is_carried_over_only_with_every_planned_run(bench, tmp_path, capsys):
    path = earlier_run(tmp_path)
    assert bench.main(["--dry-run", "--n", "1024", "--d", "16,128", "--k", "2,16", "--dtypes", "float32",
                       "--resume", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("carried over from") == 1
    assert "3 shapes would run, 0 skipped, 1 carried over" in out
    # With skinny alone planned, the shape that has its two skinny runs is finished too.
    assert bench.main(["--dry-run", "--n", "1024", "--d", "128", "--k", "16", "--dtypes", "float32",
                       "--impls", "skinny", "--resume", str(path)]) == 0
    assert "0 shapes would run, 0 skipped, 1 carried over" in capsys.readouterr().out


def test_an_unreadable_earlier_run_is_refused_with_its_name(bench, tmp_path, capsys):
    bad = tmp_path / "not.json"
    bad.write_text("[1, 2")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--dry-run", "--resume", str(bad)])
    assert exit_info.value.code != 0
    assert f"--resume {bad}" in capsys.readouterr().err


def test_an_earlier_run_of_another_commit_is_refused(bench, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SKINNY_GIT_COMMIT", "def5678")
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--n", "1024", "--d", "16", "--k", "2", "--resume", str(earlier_run(tmp_path))])
    assert exit_info.value.code != 0
    assert "measured at commit abc1234, this run is def5678" in capsys.readouterr().err
