"""Reading the committed benchmark JSON: the newest run of each benchmark, and TSM2 rows by shape.

Shared by plot.py (figures) and tables.py (the README's and docs' tables).
"""
import glob
import json
import os
import sys


def load_newest(results_dir):
    """{(benchmark, variant): json} keeping the newest "date" for each key; each JSON gets its "_path"."""
    newest = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.json"), recursive=True)):
        with open(path) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}: not JSON ({e})")
        if "experiment" in data:  # tuning runs with overrides are kept as records, not shown
            continue
        variant = data.get("precision", data.get("variant", ""))
        if data.get("benchmark") == "kmeans":  # one file per run: keyed by everything that varies
            variant = (variant, data["n"], data["d"], data["k"], data["backend"], "compare" in data)
        if data.get("benchmark") == "abft-gemm":
            variant = (variant, data["n"])  # the fault campaign (n = 2048) and the overhead run (8192)
        if data.get("benchmark") == "tsm2-bench" and any(r["algo"] == "tsm2_v0" for r in data["results"]):
            variant = "ablation"  # kept apart: a later run without the ablation must not hide it
        key = (data.get("benchmark", "?"), variant)
        if key not in newest or data.get("date", "") > newest[key].get("date", ""):
            data["_path"] = path
            newest[key] = data
    return newest


def tsm2_rows(data, algo, precision, layout="col_major", grid=True):
    """{(rows, k): result} of one algorithm in a tsm2-bench JSON: the n x n grid, or (grid=False) the K-means shape."""
    out = {}
    for r in data["results"]:
        if r["algo"] != algo or r["precision"] != precision or r["a_layout"] != layout:
            continue
        if grid != (r["rows"] == r["inner"]) or not (r.get("supported") and r.get("check_passed")):
            continue
        out[(r["rows"], r["k"])] = r
    return out
