#!/usr/bin/env python3
"""The results tables of README.md and docs/results.md, from the committed benchmark JSON.

    python3 bench/tables.py [RESULTS_DIR]        (default: bench/results/h100)

Reads the newest run of each benchmark (bench/newest.py) and prints Markdown: the headline table, TSM2
against cuBLAS and the read ceiling, K-means end to end over n, and ABFT. Each table names the JSON
it comes from, so every number in the docs can be traced to a file.
"""
import math
import os
import sys

from newest import load_newest, tsm2_rows


def source(*runs):
    """Where the numbers come from: the folders of their JSON files, device and dates."""
    folders = sorted({os.path.dirname(os.path.relpath(r["_path"])) for r in runs})
    dates = sorted({r["date"][:10] for r in runs})
    return ("From the JSON in " + ", ".join(f"`{f}/`" for f in folders) +
            f" ({runs[0]['device']['name']}, {' and '.join(dates)}).")


def kmeans(newest, precision, n, d, k, backend, compare=False):
    return newest.get(("kmeans", (precision, n, d, k, backend, compare)))


def headline(newest):
    rows, runs = [], []
    for precision in ("float", "double"):
        t, c = kmeans(newest, precision, 262144, 4096, 16, "tsm2"), kmeans(newest, precision, 262144, 4096, 16, "cublas")
        if t and c:
            runs += [t, c]
            rows.append((f"K-means 262144 × 4096, k = 16, {precision}, ms per iteration",
                         f"**{t['median_iteration_ms']:.2f}** (tsm2)", f"{c['median_iteration_ms']:.2f} (cuBLAS)"))
    a, c = kmeans(newest, "float", 1048576, 128, 1024, "auto"), kmeans(newest, "float", 1048576, 128, 1024, "cublas")
    if a and c:
        runs += [a, c]
        rows.append(("K-means 1048576 × 128, k = 1024, float, ms per iteration",
                     f"**{a['median_iteration_ms']:.2f}** (fused `nearest`)", f"{c['median_iteration_ms']:.2f} (cuBLAS + argmin)"))
    tsm2 = [d for (b, _), d in newest.items() if b == "tsm2-bench"]
    if tsm2:
        data = max(tsm2, key=lambda d: d["date"])
        runs.append(data)
        speedups = [r["speedup_vs_cublas"] for r in tsm2_rows(data, "tsm2", "float").values()]
        percents = [r["percent_of_read_ceiling"] for p in ("float", "double") for r in tsm2_rows(data, "tsm2", p).values()]
        rows.append(("TSM2 tall-skinny GEMM, 12 float shapes, geometric-mean speedup",
                     f"**{math.exp(sum(map(math.log, speedups)) / len(speedups)):.2f}×**", "cuBLAS = 1"))
        rows.append(("TSM2, % of the streaming-read ceiling, 24 grid shapes",
                     f"**{min(percents):.1f}–{max(percents):.1f} %**",
                     f"ceiling {data['read_ceiling']['gbs']:.0f} GB/s, same run"))
    for precision in ("float", "double"):
        e = newest.get(("abft-encode", precision))
        if e:
            runs.append(e)
            at = {r["backend"]: r for r in e["results"] if r["size"] == 20480 and r["side"] == "both" and r["supported"]}
            rows.append((f"ABFT full checksum encoding 20480², {precision}, ms",
                         f"**{at['fused']['median_ms']:.2f}** (fused)", f"{at['cublas']['median_ms']:.2f} (cuBLAS, two GEMMs)"))
    for precision in ("float", "double"):
        g = newest.get(("abft-gemm", (precision, 2048)))
        if g:
            runs.append(g)
            rows.append((f"ABFT: bit flips above the threshold corrected, {precision}",
                         f"**{g['corrected']} of {g['above_threshold']}**",
                         f"{g['false_alarms']} false alarms in {g['clean_trials']} clean GEMMs"
                         + (f"; {g.get('threshold_model')} threshold, detection bound "
                            f"{g['detection_bound_over_largest_clean_difference']:.0f}x the largest clean difference"
                            if "detection_bound_over_largest_clean_difference" in g else "")))
    print("| H100, medians | skinny | competitor, same run |")
    print("|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    print(source(*runs))


def tsm2_tables(newest):
    tsm2 = [d for (b, _), d in newest.items() if b == "tsm2-bench"]
    if not tsm2:
        return
    data = max(tsm2, key=lambda d: d["date"])
    for precision in ("float", "double"):
        ours, theirs = tsm2_rows(data, "tsm2", precision), tsm2_rows(data, "cublas", precision)
        ks = sorted({k for _, k in ours})
        print(f"| {precision}, % of read ceiling (cuBLAS) | " + " | ".join(f"k = {k}" for k in ks) + " |")
        print("|---|" + "---|" * len(ks))
        for n in sorted({n for n, _ in ours}):
            cells = [f"{ours[(n, k)]['percent_of_read_ceiling']:.1f} ({theirs[(n, k)]['percent_of_read_ceiling']:.1f})"
                     if (n, k) in ours and (n, k) in theirs else "—" for k in ks]
            print(f"| n = {n} | " + " | ".join(cells) + " |")
        print()
    shape = []
    for precision in ("float", "double"):
        for layout in ("row_major", "col_major"):
            ours = tsm2_rows(data, "tsm2", precision, layout, grid=False)
            theirs = tsm2_rows(data, "cublas", precision, layout, grid=False)
            for key, r in ours.items():
                if key in theirs:
                    shape.append(f"{precision} {layout.replace('_', '-')} {r['percent_of_read_ceiling']:.1f} % "
                                 f"(cuBLAS {theirs[key]['percent_of_read_ceiling']:.1f} %, {r['speedup_vs_cublas']:.2f}×)")
    if shape:
        print("K-means shape (262144 × 4096, k = 16): " + "; ".join(shape) + ".")
        print()
    print(source(data))


def kmeans_over_n(newest):
    runs = [d for (b, _), d in newest.items() if b == "kmeans" and d["d"] == 4096 and d["k"] == 16 and "compare" not in d]
    if not runs:
        return
    by = {(d["precision"], d["n"], d["backend"]): d for d in runs}
    ns = sorted({d["n"] for d in runs})
    print("| ms per iteration (tsm2 / cuBLAS, speedup) | " + " | ".join(f"n = {n}" for n in ns) + " |")
    print("|---|" + "---|" * len(ns))
    used = []
    for precision in ("float", "double"):
        cells = []
        for n in ns:
            t, c = by.get((precision, n, "tsm2")), by.get((precision, n, "cublas"))
            if t and c:
                used += [t, c]
                cells.append(f"{t['median_iteration_ms']:.3f} / {c['median_iteration_ms']:.3f}, "
                             f"{c['median_iteration_ms'] / t['median_iteration_ms']:.2f}×")
            else:
                cells.append("—")
        print(f"| {precision} | " + " | ".join(cells) + " |")
    print()
    print(source(*used))


def main():
    results_dir = sys.argv[1] if len(sys.argv) > 1 else "bench/results/h100"
    newest = load_newest(results_dir)
    for title, table in (("Headline", headline), ("TSM2 against cuBLAS and the read ceiling", tsm2_tables),
                         ("K-means end to end over n (d = 4096, k = 16, 100 iterations)", kmeans_over_n)):
        print(f"### {title}\n")
        table(newest)
        print()


if __name__ == "__main__":
    main()
