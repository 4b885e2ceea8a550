#!/usr/bin/env python3
"""Figure of fault-tolerant K-means from bench/protect_bench.sh's JSON: time per iteration unprotected and
protected, and what each campaign's faults came to.

    python3 bench/plot_protect.py bench/results/h100/2026-11-28_protect-one-product/json --out bench/figures
"""

import argparse
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHAPES = {"main": "262144 x 4096, k = 16\n(TSM2 GEMM)", "many": "1048576 x 128, k = 1024\n(fused nearest)"}
# Overhead runs without a campaign, drawn where the folder has them.
EXTRA_OVERHEAD = {"many_fast": "1048576 x 128, k = 1024\nmath fast"}
CLASSES = [("corrected", "detected, corrected", "tab:green"),
           ("detected_labels_differ", "detected, labels differ", "tab:red"),
           ("missed", "missed (above bound)", "black"),
           ("below_bound", "below the bound (rounding-sized)", "tab:gray")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=pathlib.Path)
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/figures"))
    args = p.parse_args()
    load = lambda name: json.loads((args.folder / f"{name}.json").read_text())  # noqa: E731

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    shapes = dict(SHAPES)
    shapes.update({s: name for s, name in EXTRA_OVERHEAD.items() if (args.folder / f"overhead_{s}_auto.json").exists()})
    plain = [load(f"overhead_{s}_auto")["median_iteration_ms"] for s in shapes]
    guarded = [load(f"overhead_{s}_auto_protect")["median_iteration_ms"] for s in shapes]
    xs = range(len(shapes))
    left.bar([x - 0.2 for x in xs], plain, 0.4, label="unprotected", color="tab:blue")
    bars = left.bar([x + 0.2 for x in xs], guarded, 0.4, label="--protect", color="tab:orange")
    for bar, a, b in zip(bars, plain, guarded):
        left.annotate(f"+{100 * (b / a - 1):.1f} %", (bar.get_x() + bar.get_width() / 2, b), ha="center", va="bottom")
    left.set_xticks(list(xs), list(shapes.values()), fontsize=8)
    left.set_ylim(0, 1.3 * max(guarded))
    left.set_ylabel("ms per Lloyd iteration (median of 50)")
    left.set_title("Cost of protection (H100, float)")
    left.legend(loc="upper left")

    xs = range(len(SHAPES))
    bottom = [0] * len(SHAPES)
    for key, name, colour in CLASSES:
        counts = [load(f"campaign_{s}")["campaign"][key] for s in SHAPES]
        right.bar(list(xs), counts, 0.5, bottom=bottom, label=name, color=colour)
        bottom = [b + c for b, c in zip(bottom, counts)]
    right.set_xticks(list(xs), list(SHAPES.values()))
    right.set_ylabel("faults (one per fit)")
    right.set_title("2000 injected faults per shape; 0 false alarms")
    right.set_ylim(0, 2600)
    right.legend(loc="upper center", fontsize=8, ncol=2)
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "kmeans_protect.png", dpi=120)
    print(f"wrote {args.out / 'kmeans_protect.png'}")


if __name__ == "__main__":
    main()
