#!/usr/bin/env python3
"""skinny.KMeans from Python against the kmeans program (the C++ API) on the same data, in one run.

    python3 bench/python_vs_cpp.py --kmeans build/gpu-check/apps/kmeans --json out.json

Per k: one .npy of n x d float32 uniform points and one of k initial centres (rows of X) go to a temporary
folder; then, from the same centres, for the same number of Lloyd iterations (tol = 0; the data and the
algorithm are deterministic, so each run stops at the same iteration, when no label changed, or at --iters):
  cpp    kmeans --input X.npy --init-centroids C0.npy --tol 0 --iters ITERS --json: its median_iteration_ms;
  torch  skinny.KMeans(k, init=C0, tol=0, max_iter=ITERS).fit(X as a torch CUDA tensor): median of iteration_ms_;
  numpy  the same fit from the NumPy array: median of iteration_ms_, and transfer_report_ (the copy of X to
         the GPU, once per fit, outside the iterations).
Each Python fit runs once untimed first (kernels loaded, GEMM plans made), as the program does inside its
run. The ratio python / cpp is the overhead of the Python layer per iteration (it should be ~1: the
iterations run in the same library). Uniform data, not blobs: Lloyd keeps moving labels for many iterations.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

import skinny


def cpp_run(exe: str, x_path: pathlib.Path, c_path: pathlib.Path, k: int, iters: int, folder: pathlib.Path) -> dict:
    out = folder / f"cpp_k{k}.json"
    cmd = [exe, "--input", str(x_path), "--init-centroids", str(c_path), "--k", str(k), "--tol", "0",
           "--iters", str(iters), "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"kmeans failed ({done.returncode}): {done.stderr.strip()}")
    result = json.loads(out.read_text())
    return {"ms_per_iter": result["median_iteration_ms"], "n_iter": result["n_iter_"], "inertia": result["inertia_"],
            "command": " ".join(cmd)}


def python_run(x, centres: np.ndarray, iters: int) -> dict:
    def fit():
        return skinny.KMeans(len(centres), init=centres, tol=0, max_iter=iters).fit(x)
    fit()  # untimed: loads the kernels and plans the GEMM for this shape
    km = fit()
    row = {"ms_per_iter": float(np.median(km.iteration_ms_)), "n_iter": km.n_iter_, "inertia": km.inertia_}
    if km.transfer_report_ is not None:
        row["transfer"] = km.transfer_report_
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kmeans", default="build/gpu-check/apps/kmeans", help="the kmeans program")
    p.add_argument("--n", type=int, default=1048576)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--k", default="16,1024", help="comma-separated cluster counts")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    import torch
    if not skinny.cuda_available() or not torch.cuda.is_available():
        sys.exit("python_vs_cpp: needs a CUDA device and PyTorch with CUDA")

    rng = np.random.default_rng(args.seed)
    x = rng.random((args.n, args.d), dtype=np.float32)
    x_gpu = torch.from_numpy(x).cuda()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        x_path = folder / "x.npy"
        np.save(x_path, x)
        for k in (int(v) for v in args.k.split(",")):
            centres = x[rng.choice(args.n, k, replace=False)]
            c_path = folder / f"c0_k{k}.npy"
            np.save(c_path, centres)
            runs = {"cpp": cpp_run(args.kmeans, x_path, c_path, k, args.iters, folder),
                    "torch": python_run(x_gpu, centres, args.iters), "numpy": python_run(x, centres, args.iters)}
            for name, run in runs.items():
                run.update(n=args.n, d=args.d, k=k, impl=name, ratio_vs_cpp=run["ms_per_iter"] / runs["cpp"]["ms_per_iter"])
                rows.append(run)

    print(f"{'k':>6} {'impl':>6} {'ms/iter':>9} {'vs cpp':>7} {'iters':>6} {'inertia':>14}  copy of X")
    for r in rows:
        copy = f"{r['transfer']['bytes'] / 1e6:.0f} MB in {r['transfer']['ms']:.1f} ms = {r['transfer']['gbs']:.1f} GB/s" \
            if "transfer" in r else ""
        print(f"{r['k']:>6} {r['impl']:>6} {r['ms_per_iter']:>9.3f} {r['ratio_vs_cpp']:>7.3f} {r['n_iter']:>6} "
              f"{r['inertia']:>14.6e}  {copy}")
    if args.json:
        device = torch.cuda.get_device_name()
        pathlib.Path(args.json).write_text(json.dumps(
            {"benchmark": "python_vs_cpp", "date": datetime.date.today().isoformat(), "device": device,
             "iters": args.iters, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
