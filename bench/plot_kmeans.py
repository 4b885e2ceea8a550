#!/usr/bin/env python3
"""Heat maps of skinny's K-means time over flash-kmeans' (or the PyTorch Lloyd's), from kmeans_bench.py's JSON.

    python3 bench/plot_kmeans.py RESULTS.json [MORE.json ...] [--versus flash|torch|both] [--out bench/figures]

One panel per dtype x skinny math mode; in a panel, a row per (n, d) and a column per k. Each cell is the
ratio of median ms per Lloyd iteration, skinny / competitor (below 1, blue: skinny faster); cells without
a ratio say why (mem: did not fit in GPU memory, time: time budget, k>n, err, oom, n/a: not run). Several
JSON files are merged (a later run of the same shape replaces an earlier one). Writes
kmeans_vs_flash.png and/or kmeans_vs_torch.png.
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

DTYPE_ORDER = ["float32", "float16", "bfloat16"]
MODE_ORDER = ["exact", "fast"]
NAMES = {"flash": "flash-kmeans", "torch": "PyTorch Lloyd"}


def load(paths):
    """(meta of the newest file, {(n, d, k, dtype, mode, impl): row}); ok rows win over the others."""
    rows, metas = {}, []
    for path in paths:
        with open(path) as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}: not JSON ({e})")
        if "rows" not in doc or "meta" not in doc:
            sys.exit(f"{path}: not a kmeans_bench.py result (no 'meta' and 'rows')")
        metas.append(doc["meta"])
        for r in doc["rows"]:
            key = (r["n"], r["d"], r["k"], r["dtype"], r["mode"], r["impl"])
            if key not in rows or r["status"] == "ok" or rows[key]["status"] != "ok":
                rows[key] = r
    return max(metas, key=lambda m: m.get("date", "")), rows


def pow2(v):
    return f"2^{int(math.log2(v))}" if v > 0 and v & (v - 1) == 0 else str(v)


def why(row):
    """A cell's short text when it has no ratio."""
    if row is None:
        return "n/a"
    if row["status"] == "skipped":
        reason = row.get("reason") or ""
        return "mem" if "memory" in reason else "time" if "time budget" in reason else "k>n" if "> n" in reason else "skip"
    return {"error": "err", "oom": "oom"}.get(row["status"], row["status"])


def competitor_row(rows, n, d, k, dtype, mode, versus):
    return rows.get((n, d, k, dtype, mode, versus)) or rows.get((n, d, k, dtype, "any", versus))


def ratio_cell(rows, n, d, k, dtype, mode, versus):
    """(ratio or None, text)."""
    mine = rows.get((n, d, k, dtype, mode, "skinny"))
    other = competitor_row(rows, n, d, k, dtype, mode, versus)
    if mine is None or mine["status"] != "ok":
        return None, why(mine)
    if other is None or other["status"] != "ok":
        return None, versus[:5] + " " + why(other)
    r = mine["ms_per_iter"] / other["ms_per_iter"]
    return r, f"{r:.2f}"


def plot(meta, rows, versus, out_dir):
    dtypes = [t for t in DTYPE_ORDER if any(key[3] == t for key in rows)]
    modes = [m for m in MODE_ORDER if any(key[4] == m and key[5] == "skinny" for key in rows)]
    nds = sorted({(key[0], key[1]) for key in rows})
    ks = sorted({key[2] for key in rows})
    if not dtypes or not modes or not nds:
        print(f"no skinny rows to compare with {versus}; nothing written")
        return None
    ratios = [ratio_cell(rows, n, d, k, t, m, versus)[0] for t in dtypes for m in modes for n, d in nds for k in ks]
    ratios = [r for r in ratios if r]
    span = max([4.0] + [max(r, 1 / r) for r in ratios])  # a colour scale symmetric around 1 in log
    norm = LogNorm(vmin=1 / span, vmax=span)
    cmap = plt.get_cmap("RdBu_r").copy()
    cmap.set_bad("#dddddd")

    width = 1.6 + 0.75 * len(ks)
    height = 0.9 + 0.28 * len(nds)
    fig, axes = plt.subplots(len(dtypes), len(modes), squeeze=False, layout="constrained",
                             figsize=(max(7.5, width * len(modes) + 1.5), height * len(dtypes) + 1.0))
    image = None
    for ti, dtype in enumerate(dtypes):
        for mi, mode in enumerate(modes):
            ax = axes[ti][mi]
            grid, texts = [], []
            for n, d in nds:
                line, line_text = [], []
                for k in ks:
                    r, text = ratio_cell(rows, n, d, k, dtype, mode, versus)
                    line.append(r if r else float("nan"))
                    line_text.append(text)
                grid.append(line)
                texts.append(line_text)
            image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
            for yi, line_text in enumerate(texts):
                for xi, text in enumerate(line_text):
                    value = grid[yi][xi]
                    dark = value == value and (value < 1 / span ** 0.6 or value > span ** 0.6)
                    ax.text(xi, yi, text, ha="center", va="center", fontsize=7 if len(text) <= 5 else 5.5,
                            color="white" if dark else "black")
            ax.set_xticks(range(len(ks)), [str(k) for k in ks], fontsize=8)
            ax.set_yticks(range(len(nds)), [f"n={pow2(n)}, d={d}" for n, d in nds], fontsize=7)
            ax.set_xlabel("k (clusters)", fontsize=8)
            cells = [v for line in grid for v in line if v == v]
            geo = (f", geo. mean {math.exp(sum(map(math.log, cells)) / len(cells)):.2f}" if cells else "")
            ax.set_title(f"{dtype}, skinny math='{mode}'{geo}", fontsize=9)
    device = meta.get("device", {})
    versions = meta.get("versions", {})
    other = NAMES[versus] + (f" {versions.get('flash-kmeans')}" if versus == "flash" else "")
    fig.suptitle(f"skinny / {other}: median ms per Lloyd iteration (below 1, blue: skinny faster)\n"
                 f"{device.get('name', '?')}, {meta.get('date', '?')[:10]}, commit {meta.get('git_commit', '?')}\n"
                 f"torch {versions.get('torch', '?')}, triton {versions.get('triton', '?')}", fontsize=9)
    bar = fig.colorbar(image, ax=axes, shrink=min(0.8, 6.0 / len(nds) / len(dtypes) + 0.4), aspect=30)
    step = 1 if span <= 16 else 2  # powers of 2, every other one on a wide scale
    ticks = [2.0 ** e for e in range(-10, 11, step) if 1 / span <= 2.0 ** e <= span]
    bar.set_ticks(ticks, labels=[f"{t:g}" if t >= 1 else f"1/{round(1 / t)}" for t in ticks])
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    bar.set_label(f"skinny ms / {NAMES[versus]} ms (log scale)", fontsize=8)
    path = os.path.join(out_dir, f"kmeans_vs_{versus}.png")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print("wrote", path)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", nargs="+", help="kmeans_bench.py results")
    p.add_argument("--versus", choices=["flash", "torch", "both"], default="both")
    p.add_argument("--out", default="bench/figures", help="folder of the PNGs (default bench/figures)")
    args = p.parse_args(argv)
    meta, rows = load(args.json)
    os.makedirs(args.out, exist_ok=True)
    for versus in (["flash", "torch"] if args.versus == "both" else [args.versus]):
        plot(meta, rows, versus, args.out)


if __name__ == "__main__":
    main()
