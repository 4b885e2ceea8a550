#!/usr/bin/env python3
"""Multi-GPU K-means scaling: ms per Lloyd iteration and the allreduce's share, over 1, 2, 4, 8 GPUs.

    python3 bench/kmeans_scaling.py --kmeans build/native/apps/kmeans --out scaling.json
    python3 bench/kmeans_scaling.py --launcher mpi --gpus 1,2,4,8        # mpirun -n N kmeans ... instead
    python3 bench/kmeans_scaling.py --dry-run                            # the commands only, no GPU needed
    python3 bench/kmeans_scaling.py --quick                              # small shapes: a smoke test on 1 GPU

Runs (float unless --precision double; synthetic blobs, each rank making only its own rows):
  strong  2^24 x 1024, k = 1024   (64 GiB of float: the fused nearest kernel, k-means-scale sums)
  strong  4M x 4096,   k = 16     (64 GiB of float: the GEMM path, few clusters, a large d)
  weak    2^23 points per GPU x 1024, k = 1024
on each GPU count of --gpus that the machine has (and that memory allows: the program refuses a run that
does not fit, and the refusal is recorded). Every run is `kmeans --gpus N --comm nccl` (one process, a
thread per GPU; --launcher mpi: `mpirun -n N kmeans --comm nccl`), exactly --iters iterations (synthetic
data without --tol: no early stop), --init random (the initialisation is not what is measured). The program times each
iteration with CUDA events on rank 0, and separately the collectives of each iteration (the inertia's
8-byte maximum and the group of sums, counts, inertia and changed labels: k x d x 16 + k x 4 + 32 bytes),
waiting for the slowest rank included. The JSON holds every run's medians, the speedup and efficiency
against 1 GPU (strong) or the time ratio (weak), and the commands.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile

STRONG = [
    {"name": "strong-2^24x1024-k1024", "n": 1 << 24, "d": 1024, "k": 1024},
    {"name": "strong-4Mx4096-k16", "n": 4 << 20, "d": 4096, "k": 16},
]
WEAK = {"name": "weak-2^23-per-gpu-x1024-k1024", "n_per_gpu": 1 << 23, "d": 1024, "k": 1024}
QUICK_STRONG = [
    {"name": "strong-2^18x128-k256", "n": 1 << 18, "d": 128, "k": 256},
    {"name": "strong-2^17x1024-k16", "n": 1 << 17, "d": 1024, "k": 16},
]
QUICK_WEAK = {"name": "weak-2^16-per-gpu-x128-k256", "n_per_gpu": 1 << 16, "d": 128, "k": 256}


def device_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
        return sum(1 for line in out.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.CalledProcessError):
        return 0


def command(args, gpus: int, n: int, d: int, k: int, json_path: str) -> list:
    base = [args.kmeans, "--n", str(n), "--d", str(d), "--k", str(k), "--iters", str(args.iters),
            "--init", "random", "--precision", args.precision, "--comm", "nccl", "--json", json_path]
    if args.launcher == "mpi":
        return [args.mpirun, "-n", str(gpus)] + shlex.split(args.mpirun_flags) + base
    return base + ["--gpus", str(gpus)]


def run_one(args, gpus: int, n: int, d: int, k: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        json_path = os.path.join(tmp, "run.json")
        cmd = command(args, gpus, n, d, k, json_path)
        row = {"gpus": gpus, "n": n, "d": d, "k": k, "command": " ".join(shlex.quote(c) for c in cmd)}
        if args.dry_run:
            print(row["command"])
            return row
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            row["refused"] = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
            print(f"  {gpus} GPU(s): failed: {row['refused'].splitlines()[-1] if row['refused'] else proc.returncode}")
            return row
        with open(json_path) as f:
            r = json.load(f)
    for key in ("median_iteration_ms", "median_allreduce_ms", "median_distances_ms", "median_argmin_ms",
                "median_update_ms", "allreduce_bytes_per_iteration", "n_iter_", "distances", "communicator",
                "ranks", "inertia_", "init_ms", "setup_ms", "device", "git_commit", "iteration_ms", "allreduce_ms"):
        if key in r:
            row[key] = r[key]
    ms, comm = row["median_iteration_ms"], row["median_allreduce_ms"]
    row["allreduce_share"] = comm / ms if ms > 0 else None
    row["allreduce_gb_per_s"] = row["allreduce_bytes_per_iteration"] / (comm * 1e6) if comm > 0 else None
    print(f"  {gpus} GPU(s): {ms:9.3f} ms/iter, allreduce {comm:8.3f} ms ({100 * row['allreduce_share']:.1f} %), "
          f"distances via {row['distances']}")
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    default_kmeans = next((c for c in (os.path.join(here, "..", "build", b, "apps", "kmeans") for b in ("native", "dev"))
                           if os.path.exists(c)), "kmeans")
    p.add_argument("--kmeans", default=default_kmeans, help="the kmeans program (default: build/native or build/dev)")
    p.add_argument("--gpus", default="1,2,4,8", help="GPU counts (those above the machine's are skipped)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--precision", default="float", choices=["float", "double"])
    p.add_argument("--launcher", default="threads", choices=["threads", "mpi"],
                   help="threads: kmeans --gpus N (one process); mpi: mpirun -n N kmeans (a process per GPU)")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--mpirun-flags", default="", help="extra mpirun arguments, e.g. '--bind-to none'")
    p.add_argument("--quick", action="store_true", help="small shapes (a smoke test, one GPU is enough)")
    p.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    p.add_argument("--out", default="kmeans_scaling.json")
    args = p.parse_args()

    have = device_count()
    counts = [int(c) for c in args.gpus.split(",") if c.strip()]
    if not args.dry_run:
        skipped = [c for c in counts if c > have]
        counts = [c for c in counts if c <= have]
        if skipped:
            print(f"skipping {skipped} GPUs: this machine has {have}")
        if not counts:
            print("no GPU count to run", file=sys.stderr)
            return 1
    strong, weak = (QUICK_STRONG, QUICK_WEAK) if args.quick else (STRONG, WEAK)

    result = {"benchmark": "kmeans-scaling", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "launcher": args.launcher, "precision": args.precision, "iters": args.iters, "gpus_on_machine": have,
              "strong": [], "weak": {}}
    for shape in strong:
        print(f"{shape['name']}: n = {shape['n']}, d = {shape['d']}, k = {shape['k']}")
        rows = [run_one(args, g, shape["n"], shape["d"], shape["k"]) for g in counts]
        base = next((r for r in rows if r["gpus"] == 1 and "median_iteration_ms" in r), None)
        for r in rows:
            if base and "median_iteration_ms" in r:
                r["speedup"] = base["median_iteration_ms"] / r["median_iteration_ms"]
                r["efficiency"] = r["speedup"] / r["gpus"]
        result["strong"].append({**shape, "runs": rows})
    print(f"{weak['name']}: {weak['n_per_gpu']} points per GPU, d = {weak['d']}, k = {weak['k']}")
    rows = [run_one(args, g, weak["n_per_gpu"] * g, weak["d"], weak["k"]) for g in counts]
    base = next((r for r in rows if r["gpus"] == 1 and "median_iteration_ms" in r), None)
    for r in rows:
        if base and "median_iteration_ms" in r:
            r["time_ratio_to_1_gpu"] = r["median_iteration_ms"] / base["median_iteration_ms"]
    result["weak"] = {**weak, "runs": rows}

    if args.dry_run:
        return 0
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\n{'run':34s} {'GPUs':>4s} {'ms/iter':>10s} {'allreduce':>10s} {'speedup':>8s} {'eff.':>6s}")
    for block in result["strong"] + [result["weak"]]:
        for r in block["runs"]:
            if "median_iteration_ms" not in r:
                print(f"{block['name']:34s} {r['gpus']:4d}   refused or failed")
                continue
            speed = r.get("speedup", r.get("time_ratio_to_1_gpu"))
            eff = r.get("efficiency")
            print(f"{block['name']:34s} {r['gpus']:4d} {r['median_iteration_ms']:10.3f} {r['median_allreduce_ms']:10.3f} "
                  f"{speed if speed is not None else float('nan'):8.2f} {eff if eff is not None else float('nan'):6.2f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
