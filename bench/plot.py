#!/usr/bin/env python3
"""Figures from the benchmark JSON files.

    python3 bench/plot.py [RESULTS_DIR] [FIGURES_DIR]     (defaults: bench/results/h100, bench/figures)

Reads every *.json in RESULTS_DIR, keeps the newest file (by its "date") of each benchmark and precision,
and writes one PNG per figure. Each figure's title names the device and the date the numbers were measured.
"""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from newest import load_newest, tsm2_rows  # noqa: E402


def subtitle(data):
    return f'{data["device"]["name"]}, {data["date"][:10]}, commit {data.get("git_commit", "?")}'


def save(fig, figures_dir, name):
    path = os.path.join(figures_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print("wrote", path)


def plot_ladder(data, figures_dir):
    """The SGEMM ladder: GFLOP/s per algorithm and size as bars, cuBLAS as a line per size."""
    rows = [r for r in data["results"] if r.get("supported") and r.get("check_passed")]
    sizes = sorted({r["m"] for r in rows})
    algos = [a for a in dict.fromkeys(r["algo"] for r in rows) if a != "cublas" and not a.startswith("tsm2")]
    if not sizes or not algos:
        return
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(sizes)
    for si, size in enumerate(sizes):
        by_algo = {r["algo"]: r["gflops"] for r in rows if r["m"] == size}
        xs = [i + si * width for i in range(len(algos))]
        ax.bar(xs, [by_algo.get(a, 0) / 1e3 for a in algos], width, label=f"{size}")
        if "cublas" in by_algo:
            ax.hlines(by_algo["cublas"] / 1e3, -0.5, len(algos) - 0.5, colors=f"C{si}", linestyles="dashed",
                      linewidth=1)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(algos))], algos, rotation=20)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f'GEMM ladder, {data["precision"]} (dashed: cuBLAS at each size)\n{subtitle(data)}', fontsize=10)
    ax.legend(title="m = n = k", fontsize=8)
    save(fig, figures_dir, f'ladder_{data["precision"]}.png')


def plot_tsm2(data, figures_dir):
    """TSM2 and cuBLAS bandwidth against the read ceiling (the paper's Figs. 5-7): one panel per precision."""
    ceiling = data["read_ceiling"]["gbs"]
    precisions = [p for p in ("float", "double") if tsm2_rows(data, "tsm2", p)]
    if not precisions:
        return
    fig, axes = plt.subplots(1, len(precisions), figsize=(6 * len(precisions), 4.2), squeeze=False)
    for ax, precision in zip(axes[0], precisions):
        tsm2, cublas = tsm2_rows(data, "tsm2", precision), tsm2_rows(data, "cublas", precision)
        shapes = sorted(tsm2)
        labels = [f"n={n // 1024}k\nk={k}" for n, k in shapes]
        xs = range(len(shapes))
        ax.bar([x - 0.2 for x in xs], [cublas[s]["gbs"] if s in cublas else 0 for s in shapes], 0.4, label="cuBLAS")
        ax.bar([x + 0.2 for x in xs], [tsm2[s]["gbs"] for s in shapes], 0.4, label="tsm2")
        ax.axhline(ceiling, color="k", linestyle="dashed", linewidth=1, label=f"read ceiling {ceiling:.0f} GB/s")
        ax.set_xticks(list(xs), labels, fontsize=7)
        ax.set_ylabel("GB/s (bytes of A / time)")
        ax.set_title(f"A n x n column-major times B n x k, {precision}", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Tall-and-skinny GEMM against the streaming-read ceiling\n{subtitle(data)}", fontsize=10)
    save(fig, figures_dir, "tsm2_bandwidth.png")


def plot_ablation(data, figures_dir):
    """The paper's Fig. 4: V1-V3 (and tsm2) as speedups over V0 on the grid."""
    versions = ["tsm2_v1", "tsm2_v2", "tsm2_v3", "tsm2"]
    precisions = [p for p in ("float", "double") if tsm2_rows(data, "tsm2_v0", p)]
    if not precisions:
        return
    fig, axes = plt.subplots(1, len(precisions), figsize=(6 * len(precisions), 4.2), squeeze=False)
    for ax, precision in zip(axes[0], precisions):
        v0 = tsm2_rows(data, "tsm2_v0", precision)
        shapes = sorted(v0)
        width = 0.8 / len(versions)
        for vi, version in enumerate(versions):
            rows = tsm2_rows(data, version, precision)
            ys = [v0[s]["median_ms"] / rows[s]["median_ms"] if s in rows else 0 for s in shapes]
            ax.bar([i + vi * width for i in range(len(shapes))], ys, width, label=version)
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(shapes))],
                      [f"n={n // 1024}k\nk={k}" for n, k in shapes], fontsize=7)
        ax.set_ylabel("speedup over V0 (log)")
        ax.set_title(f"TSM2 versions, {precision}", fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Ablation (the paper's Fig. 4)\n{subtitle(data)}", fontsize=10)
    save(fig, figures_dir, "tsm2_ablation.png")


def main():
    results_dir = sys.argv[1] if len(sys.argv) > 1 else "bench/results/h100"
    figures_dir = sys.argv[2] if len(sys.argv) > 2 else "bench/figures"
    os.makedirs(figures_dir, exist_ok=True)
    newest = load_newest(results_dir)
    for (benchmark, _), data in sorted(newest.items()):
        if benchmark == "gemm-bench":
            plot_ladder(data, figures_dir)
    tsm2_runs = [d for (b, _), d in newest.items() if b == "tsm2-bench"]
    if tsm2_runs:
        plot_tsm2(max(tsm2_runs, key=lambda d: d["date"]), figures_dir)
    if ("tsm2-bench", "ablation") in newest:
        plot_ablation(newest[("tsm2-bench", "ablation")], figures_dir)
    for plotter in EXTRA_PLOTTERS:
        plotter(newest, figures_dir)


def plot_kmeans(newest, figures_dir):
    """K-means end to end over n (the paper's Fig. 8): ms per iteration with tsm2 and cuBLAS, and the speedup."""
    runs = [d for (b, _), d in newest.items() if b == "kmeans" and d["d"] == 4096 and d["k"] == 16 and "compare" not in d]
    if not runs:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for precision, marker in (("float", "o"), ("double", "s")):
        by = {(d["n"], d["backend"]): d["median_iteration_ms"] for d in runs if d["precision"] == precision}
        ns = sorted({n for n, _ in by})
        for backend, color in (("tsm2", "C1"), ("cublas", "C0")):
            axes[0].plot(ns, [by.get((n, backend), math.nan) for n in ns], marker=marker, color=color,
                         label=f"{backend}, {precision}")
        axes[1].plot(ns, [by[(n, "cublas")] / by[(n, "tsm2")] for n in ns if (n, "tsm2") in by and (n, "cublas") in by],
                     marker=marker, label=precision)
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("points n (d = 4096, k = 16)")
    axes[0].set_ylabel("median ms per Lloyd iteration")
    axes[0].legend(fontsize=8)
    axes[1].set_xscale("log", base=2)
    axes[1].axhline(1, color="k", linewidth=0.8)
    axes[1].set_xlabel("points n")
    axes[1].set_ylabel("speedup of tsm2 over cuBLAS, end to end")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"K-means, 100 iterations (the paper's Fig. 8)\n{subtitle(runs[0])}", fontsize=10)
    save(fig, figures_dir, "kmeans_speedup.png")


def plot_abft(newest, figures_dir):
    """ABFT encoding over size (the paper's Fig. 9): speedup of each backend over cuBLAS, row + column checksums."""
    runs = [d for (b, _), d in newest.items() if b == "abft-encode"]
    if not runs:
        return
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4), squeeze=False)
    for ax, data in zip(axes[0], sorted(runs, key=lambda d: d["precision"], reverse=True)):
        rows = [r for r in data["results"] if r.get("supported") and r["side"] == "both"]
        sizes = sorted({r["size"] for r in rows})
        for backend in ("tsm2", "fused"):
            by = {r["size"]: r.get("speedup_vs_cublas", math.nan) for r in rows if r["backend"] == backend}
            ax.plot(sizes, [by.get(s, math.nan) for s in sizes], marker="o", label=f"{backend} (both checksums)")
        ax.axhline(1, color="k", linewidth=0.8)
        ax.axhline(2, color="grey", linewidth=0.8, linestyle="dotted")
        ax.set_xlabel("matrix size n (A is n x n)")
        ax.set_ylabel("speedup over cuBLAS (two GEMMs)")
        ax.set_title(f'{data["precision"]}, density {data["density"]}', fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"ABFT checksum encoding (the paper's Fig. 9)\n{subtitle(runs[0])}", fontsize=10)
    save(fig, figures_dir, "abft_speedup.png")


EXTRA_PLOTTERS = [plot_kmeans, plot_abft]

if __name__ == "__main__":
    main()
