#!/usr/bin/env python3
"""skinny.KMeans against flash-kmeans and a PyTorch Lloyd: median GPU ms per Lloyd iteration over a grid.

    python3 bench/kmeans_bench.py --dry-run                     # the grid, its skips and estimates; no GPU, no torch
    python3 bench/kmeans_bench.py --n 1048576 --d 128 --k 1024 --dtypes float16 --json out.json
    python3 bench/kmeans_bench.py --check-api                   # exit 0 if the installed skinny has the API used here

Grid (defaults): n in {2^18, 2^20, 2^22, 2^24}, d in {2, 16, 128, 512, 4096}, k in {2, 16, 128, 1024, 8192},
dtypes float32 / float16 / bfloat16, skinny's math modes "exact" and "fast". Shapes with k > n, or whose data
and work space do not fit in GPU memory, are recorded as skipped with the reason; so are the shapes left when
--time-budget runs out (or would run out by the estimate printed with --dry-run).

What runs, per shape (every implementation starts from the same k distinct points of X, runs exactly
ITERS Lloyd iterations with no early stop, and its final centroids give its inertia):
  skinny   skinny.KMeans(n_clusters=k, init=C0, n_init=1, max_iter=ITERS, tol=0.0, math=MODE,
           stop_when_stable=False).fit(X) with X the torch CUDA tensor; the time is the median of
           km.iteration_ms_ (CUDA events recorded by the library, from the end of one iteration to the end
           of the next: the library queues an iteration's assignment before it checks the last one, so
           any wait for the host between iterations is counted). A first fit of WARMUP iterations, not
           timed, loads the kernels and plans the GEMM.
  flash    flash-kmeans (pip: flash-kmeans, Triton). Its only fit that takes given centroids,
           flash_kmeans.batch_kmeans_Euclid(x, k, max_iters, tol, init_centroids), runs a Python loop whose
           body is flash_kmeans.kmeans_triton_impl._euclid_iter (assign kernel + sort + centroid update
           kernel + centre shift), then `if center_shift < tol: break` (a host sync) and a clone of the
           centroids. We run that same loop body ourselves, from the same precomputed ||x||^2, with CUDA
           events around each iteration (body + clone; the tol check's sync comes after the stop event, so
           host gaps between iterations are not counted: stricter on skinny than on it), after WARMUP
           untimed iterations (Triton compiles a kernel per (N, K, D): all three are constexpr). Why not time
           the fit: a fit's time also holds the ||x||^2 pass and, on a shape's first call, Triton's compiles,
           and gives no per-iteration median. As a check, the row also carries fit_ms_per_iter: events
           around batch_kmeans_Euclid with max_iters = ITERS and with max_iters = 1 (tol = 0 runs them all),
           the difference over ITERS - 1, and fit_centroid_max_diff, the largest difference between that
           fit's centroids and ours (not 0: its sums use float atomics). --no-flash-fit-check drops the check.
  torch    a plain PyTorch Lloyd written here (TorchLloyd): per chunk of rows, ||c||^2 - 2 X C^T in one
           addmm (||x||^2 is the same for every centre of a row, so the argmin does not need it), in the
           input dtype with float32 accumulation and a float32 result, then argmin; centroid sums in
           float32 (a one-hot GEMM for k <= 128, where index_add_'s atomics would pile onto k rows; index_add_
           above), counts by bincount, empty clusters keep their centre. float32 input: math "exact" runs
           IEEE float32 GEMMs, "fast" TF32 (torch.set_float32_matmul_precision). float16/bfloat16: one run
           (mode "any"), reduced-precision reductions off. CUDA events around each iteration, after WARMUP.

Inertia: float64, on the GPU, in chunks of rows, the same function for every implementation: the nearest
centre of each point by float64 distances, then sum ||x - c||^2 in float64 (X as given, in its dtype,
widened). skinny's rows also carry label_excess: the float64 inertia of skinny's own final labels (labels_,
assigned in its mode's precision) at its final centroids, over that best inertia, minus 1. It measures the
labels' accuracy at the same centres; the inertias of two modes after ITERS iterations also differ where
their trajectories part (a label flipped early can lead to another local optimum). Ratios on skinny's
rows: ratio_vs_flash = skinny ms / flash ms and ratio_vs_torch = skinny ms / torch ms (same mode, or
"any"); below 1 means skinny is faster.

Data: Gaussian blobs made on the GPU with a seeded torch.Generator, in float32 and rounded to the dtype
(the same seed for every dtype): --blobs centres uniform in [-1, 1]^d, sigma 0.1, labels uniform. Small
values on purpose: flash-kmeans keeps ||x||^2 in the input dtype, which overflows float16 above 65504.

Shapes whose estimated time per implementation passes --impl-seconds run fewer iterations (at least
--min-iters); the JSON row says how many. JSON (rewritten after every shape): {"benchmark", "date", "meta",
"rows": [{n, d, k, dtype, mode, impl, ms_per_iter, inertia, status, reason, iters, ...}], "targets"}; status
is ok, skipped, error or oom. "targets" (at the end, also printed): issue 20's criteria over the shapes
where skinny's two modes and flash-kmeans ran (fast <= 0.6x and exact <= 0.9x flash-kmeans's time, the
geometric means, fast inertia within 1e-5 of exact after ITERS iterations, fast labels within 1e-5 of the
best at their own centres) and the runs slower than the PyTorch Lloyd. Figures:
python3 bench/plot_kmeans.py OUT.json. How to run it on the GPU machine: bench/README-kmeans.md.

A grid longer than one sitting: --resume EARLIER.json carries over the shapes that an earlier run of the same
commit finished (every planned run ok) and runs the rest, so a --time-budget run can be completed by a second
one. Each shape's implementations still ran together, in one run; the JSON's meta names the earlier file.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import subprocess
import sys
import time

DEFAULT_N = [1 << 18, 1 << 20, 1 << 22, 1 << 24]
DEFAULT_D = [2, 16, 128, 512, 4096]
DEFAULT_K = [2, 16, 128, 1024, 8192]
DTYPES = ("float32", "float16", "bfloat16")
DTYPE_ALIASES = {"fp32": "float32", "f32": "float32", "float": "float32", "fp16": "float16", "f16": "float16",
                 "half": "float16", "bf16": "bfloat16"}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
MODES = ("exact", "fast")
IMPLS = ("skinny", "flash", "torch")
ONEHOT_MAX_K = 128  # the PyTorch Lloyd sums clusters with a one-hot GEMM up to this k, index_add_ above
BLOB_SIGMA = 0.1
BLOB_CHUNK_ROWS = 1 << 15  # the blobs are drawn this many rows at a time: fixed, so that X depends on the seed alone
GIB = 1 << 30
DEVICE = "cuda"  # every tensor of the benchmark lives here

# Rough H100 figures for the estimates only (--dry-run, iteration counts, the time budget): nothing measured
# depends on them.
EST_FLOPS = {"ieee": 45e12, "tf32": 250e12, "half": 450e12, "f64": 50e12}
EST_BANDWIDTH = 2.6e12
EST_SETUP_S = {"skinny": 0.5, "flash": 3.0, "torch": 0.2}  # per shape: first calls, Triton's compiles


# ---------------------------------------------------------------------------------------------- the grid

def parse_sizes(text: str) -> list:
    """'262144,2^20,1M' -> [262144, 1048576, 1048576]."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        p = part.lower()
        try:
            if "^" in p:
                base, exp = p.split("^")
                value = int(base) ** int(exp)
            elif p[-1] in "km":
                value = int(p[:-1]) * (1 << (10 if p[-1] == "k" else 20))
            else:
                value = int(p)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a size: {part!r} (write 1048576, 2^20 or 1M)")
        if value < 1:
            raise argparse.ArgumentTypeError(f"sizes must be >= 1, got {part!r}")
        out.append(value)
    if not out:
        raise argparse.ArgumentTypeError("empty list")
    return out


def parse_choices(allowed, aliases=None):
    def parse(text: str) -> list:
        out = []
        for part in filter(None, (p.strip().lower() for p in text.split(","))):
            part = (aliases or {}).get(part, part)
            if part not in allowed:
                raise argparse.ArgumentTypeError(f"{part!r} is not one of {', '.join(allowed)}")
            if part not in out:
                out.append(part)
        if not out:
            raise argparse.ArgumentTypeError("empty list")
        return out
    return parse


def planned_runs(dtype: str, modes: list, impls: list) -> list:
    """(impl, mode) pairs of one shape. flash-kmeans has no modes ("any"); the PyTorch Lloyd has two for
    float32 (IEEE or TF32 GEMMs) and one for the half types (tensor cores, float32 accumulation either way)."""
    runs = []
    if "skinny" in impls:
        runs += [("skinny", m) for m in modes]
    if "flash" in impls:
        runs.append(("flash", "any"))
    if "torch" in impls:
        runs += [("torch", m) for m in modes] if dtype == "float32" else [("torch", "any")]
    return runs


def gemm_precision(impl: str, mode: str, dtype: str) -> str:
    """The arithmetic of the distance GEMM as the estimates assume it (skinny's modes: a guess, for the
    estimates only)."""
    if dtype != "float32":
        return "ieee" if (impl == "skinny" and mode == "exact") else "half"
    if impl == "flash":
        return "tf32"
    return "ieee" if mode == "exact" else "tf32"


def chunk_rows(n: int, bytes_per_row: int, chunk_bytes: int) -> int:
    return max(1, min(n, chunk_bytes // max(1, bytes_per_row)))


def memory_needed(n: int, d: int, k: int, dtype: str, chunk_bytes: int) -> int:
    """Bytes the shape needs on the GPU at its peak: X, per-point buffers of the three implementations
    (labels, norms, flash-kmeans' sort), centroid buffers, the chunked work space of the PyTorch Lloyd and
    of the float64 inertia, and the data generator's chunks. skinny's optional column-major copy of X is not
    counted: the library makes it only when it fits."""
    x = n * d * DTYPE_BYTES[dtype]
    per_point = 64 * n
    centroids = 32 * k * d
    blob_chunks = 2 * BLOB_CHUNK_ROWS * d * 4
    return x + per_point + centroids + 2 * chunk_bytes + blob_chunks


def est_iteration_ms(impl: str, mode: str, n: int, d: int, k: int, dtype: str, chunk_bytes: int) -> float:
    b = DTYPE_BYTES[dtype]
    flops = 2.0 * n * d * k
    traffic = 2.0 * n * d * b  # the assignment and the update each read X
    t = flops / EST_FLOPS[gemm_precision(impl, mode, dtype)]
    if impl == "torch":
        traffic += 8.0 * n * k  # the float32 distances, written then read by argmin
        if k <= ONEHOT_MAX_K:
            t *= 2  # the one-hot GEMM of the update
        chunks = math.ceil(n / chunk_rows(n, 4 * (k + d), chunk_bytes))
        t += chunks * 30e-6
    return 1e3 * max(t, traffic / EST_BANDWIDTH) + 0.1


def est_inertia_s(n: int, d: int, k: int, dtype: str) -> float:
    return 2.0 * n * d * k / EST_FLOPS["f64"] + n * d * (DTYPE_BYTES[dtype] + 16) / EST_BANDWIDTH


def shape_iterations(args, runs, n, d, k, dtype) -> int:
    """--iters, or fewer (not below --min-iters) when the slowest implementation's estimate says that
    --iters of them would pass --impl-seconds."""
    slowest = max(est_iteration_ms(i, m, n, d, k, dtype, args.chunk_bytes) for i, m in runs)
    fit = int(args.impl_seconds * 1e3 / slowest)
    return max(min(args.iters, args.min_iters), min(args.iters, fit))


def est_shape_s(args, runs, n, d, k, dtype, iters) -> float:
    total = 0.0
    for impl, mode in runs:
        t = est_iteration_ms(impl, mode, n, d, k, dtype, args.chunk_bytes) / 1e3
        count = iters + args.warmup
        if impl == "flash" and args.flash_fit_check:
            count += iters + 1
        total += count * t + EST_SETUP_S[impl] + est_inertia_s(n, d, k, dtype)
    return total


def est_data_s(n: int, d: int) -> float:
    return n * d / 2e10 + 0.2


def enumerate_shapes(args, memory_bytes):
    """[(n, d, dtype, k, runs, skip_reason or None, iterations, estimated seconds)] in run order: the data of
    one (n, d, dtype) is made once for all its k."""
    shapes = []
    for n, d, dtype, k in itertools.product(args.n, args.d, args.dtypes, args.k):
        runs = planned_runs(dtype, args.modes, args.impls)
        reason = None
        if k > n:
            reason = f"k = {k} > n = {n}"
        else:
            need = memory_needed(n, d, k, dtype, args.chunk_bytes)
            if memory_bytes is not None and need > memory_bytes:
                reason = (f"GPU memory: needs about {need / GIB:.1f} GiB (X alone {n * d * DTYPE_BYTES[dtype] / GIB:.1f}), "
                          f"{memory_bytes / GIB:.1f} GiB usable")
        iters = shape_iterations(args, runs, n, d, k, dtype)
        est = 0.0 if reason else est_shape_s(args, runs, n, d, k, dtype, iters)
        shapes.append((n, d, dtype, k, runs, reason, iters, est))
    return shapes


def finished_shapes(path: str):
    """An earlier run's JSON: (its commit, {(n, d, k, dtype): rows} of the shapes whose runs all ended ok)."""
    with open(path) as f:
        doc = json.load(f)
    by_shape = {}
    for r in doc.get("rows", []):
        by_shape.setdefault((r["n"], r["d"], r["k"], r["dtype"]), []).append(r)
    done = {key: rows for key, rows in by_shape.items() if all(r["status"] == "ok" for r in rows)}
    return doc.get("meta", {}).get("git_commit"), done


def carried_rows(args, n: int, d: int, k: int, dtype: str, runs):
    """--resume: the earlier run's rows of this shape when they hold every planned run, else None."""
    rows = args.done.get((n, d, k, dtype)) if args.resume else None
    if rows is None or {(r["impl"], r["mode"]) for r in rows} != set(runs):
        return None
    return rows


def time_budget_reason(args, elapsed: float, est: float):
    if args.time_budget is None:
        return None
    if elapsed >= args.time_budget:
        return f"time budget ({args.time_budget:.0f} s) spent"
    if elapsed + est > args.time_budget:
        return (f"time budget: estimated {est:.0f} s, {args.time_budget - elapsed:.0f} s of "
                f"{args.time_budget:.0f} s left")
    return None


def dry_run(args) -> None:
    memory = args.gpu_mem_gib * GIB if args.gpu_mem_gib else 79.0 * GIB
    print(f"dry run: {len(args.n)} n x {len(args.d)} d x {len(args.k)} k x {len(args.dtypes)} dtypes; "
          f"modes {','.join(args.modes)}; implementations {','.join(args.impls)}; "
          f"GPU memory taken as {memory / GIB:.1f} GiB usable (--gpu-mem-gib)")
    print("estimates are rough (H100 ceilings, no overheads measured): they choose iteration counts and "
          "apply the time budget")
    print(f"{'n':>9} {'d':>5} {'k':>5} {'dtype':9} {'iters':>5} {'est s':>7} {'elapsed':>8}  runs / skip reason")
    elapsed, counted, skipped, data_made = 0.0, 0, 0, set()
    carried = 0
    for n, d, dtype, k, runs, reason, iters, est in enumerate_shapes(args, memory):
        if reason is None and carried_rows(args, n, d, k, dtype, runs) is not None:
            carried += 1
            print(f"{n:9d} {d:5d} {k:5d} {dtype:9}     - {0:7.1f} {elapsed:8.0f}  carried over from {args.resume}")
            continue
        if reason is None:
            data = 0.0 if (n, d, dtype) in data_made else est_data_s(n, d)
            reason = time_budget_reason(args, elapsed, est + data)
            if reason is None:
                data_made.add((n, d, dtype))
                elapsed += est + data
        what = reason if reason else " ".join(f"{i}:{m}" for i, m in runs)
        if reason:
            skipped += 1
        else:
            counted += 1
        print(f"{n:9d} {d:5d} {k:5d} {dtype:9} {iters if not reason else '-':>5} "
              f"{est if not reason else 0:7.1f} {elapsed:8.0f}  {'SKIP ' if reason else ''}{what}")
    print(f"{counted} shapes would run, {skipped} skipped, {carried} carried over; estimated {elapsed:.0f} s "
          f"({elapsed / 60:.1f} min) of GPU work" + (f" within --time-budget {args.time_budget:.0f} s"
                                                       if args.time_budget else ""))


# --------------------------------------------------------------------------------------- skinny's API

def check_skinny_api():
    """The installed skinny, or SystemExit(3) naming what it lacks."""
    try:
        import skinny
    except ImportError as e:
        raise SystemExit(f"kmeans_bench: cannot import skinny ({e}); install it first: "
                         f"CUDAARCHS=native pip install --no-build-isolation .   (or run with --impls flash,torch)")
    import inspect
    params = inspect.signature(skinny.KMeans.__init__).parameters
    missing = [p for p in ("math", "stop_when_stable") if p not in params]
    if missing:
        where = getattr(skinny, "__file__", "?")
        raise SystemExit(f"kmeans_bench: the installed skinny ({getattr(skinny, '__version__', '?')}, {where}) lacks "
                         f"skinny.KMeans({', '.join(m + '=...' for m in missing)}); this benchmark needs "
                         f"KMeans(..., math='exact'|'fast', stop_when_stable=False) and iteration_ms_. Reinstall "
                         f"skinny from a tree that has them (pip install --no-build-isolation .), or run "
                         f"with --impls flash,torch")
    return skinny


# ------------------------------------------------------------------------------------------- the GPU work

def torch_dtype(torch, name: str):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def make_blobs(torch, n: int, d: int, dtype: str, blobs: int, seed: int):
    """n x d Gaussian blobs on the GPU, made in float32 chunks of fixed size and rounded to dtype: the same
    values for every dtype."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    centres = torch.rand(blobs, d, device=DEVICE, generator=g) * 2 - 1
    x = torch.empty(n, d, device=DEVICE, dtype=torch_dtype(torch, dtype))
    for r0 in range(0, n, BLOB_CHUNK_ROWS):
        r1 = min(n, r0 + BLOB_CHUNK_ROWS)
        labels = torch.randint(blobs, (r1 - r0,), device=DEVICE, generator=g)
        part = torch.randn(r1 - r0, d, device=DEVICE, generator=g)
        part.mul_(BLOB_SIGMA).add_(centres[labels])
        x[r0:r1].copy_(part)
    del centres, labels, part
    return x


def initial_centroids(torch, x, k: int, seed: int):
    """k distinct rows of X (float32, k x d) chosen from the seed: candidates drawn without replacement,
    duplicates (possible after rounding to a half type) dropped in draw order."""
    import numpy as np
    n = x.shape[0]
    rng = np.random.default_rng([seed, n, k])
    m = min(n, 2 * k + 16)
    idx = torch.as_tensor(rng.choice(n, size=m, replace=False), device=DEVICE)
    cand = x[idx].float()
    _, inverse = torch.unique(cand, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), m, device=DEVICE, dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(m, device=DEVICE), reduce="amin")
    keep = torch.sort(first).values[:k]
    if keep.numel() < k:
        raise RuntimeError(f"fewer than k = {k} distinct points among {m} drawn")
    return cand[keep].contiguous()


def inertia64(torch, x, centroids, chunk_bytes: int) -> float:
    """Sum over the points of the squared distance to the nearest centre, all in float64 on the GPU."""
    c = centroids.to(torch.float64)
    c_sq = (c * c).sum(1)
    n, d = x.shape
    k = c.shape[0]
    total = torch.zeros((), device=DEVICE, dtype=torch.float64)
    rows = chunk_rows(n, 8 * (2 * d + k), chunk_bytes)
    for r0 in range(0, n, rows):
        xc = x[r0:r0 + rows].to(torch.float64)
        nearest = torch.addmm(c_sq, xc, c.t(), alpha=-2.0).argmin(1)
        diff = xc.sub_(c[nearest])
        total += (diff * diff).sum()
    return float(total)


def inertia64_of_labels(torch, x, centroids, labels, chunk_bytes: int) -> float:
    """Sum over the points of ||x - c[label]||^2 in float64 on the GPU, for the given labels."""
    c = centroids.to(torch.float64)
    n, d = x.shape
    total = torch.zeros((), device=DEVICE, dtype=torch.float64)
    rows = chunk_rows(n, 8 * 2 * d, chunk_bytes)
    for r0 in range(0, n, rows):
        diff = x[r0:r0 + rows].to(torch.float64).sub_(c[labels[r0:r0 + rows]])
        total += (diff * diff).sum()
    return float(total)


def event_ms(torch, starts, stops) -> list:
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, stops)]


def new_events(torch, count: int):
    return ([torch.cuda.Event(enable_timing=True) for _ in range(count)],
            [torch.cuda.Event(enable_timing=True) for _ in range(count)])


def as_cuda_float32(torch, a):
    """Centroids from any implementation (NumPy, ml_dtypes bfloat16, torch, DLPack) as a float32 CUDA tensor."""
    if isinstance(a, torch.Tensor):
        return a.detach().to(device=DEVICE, dtype=torch.float32)
    if hasattr(a, "__dlpack__") and not hasattr(a, "__array_interface__"):
        return torch.from_dlpack(a).to(device=DEVICE, dtype=torch.float32)
    import numpy as np
    return torch.from_numpy(np.ascontiguousarray(np.asarray(a).astype(np.float32))).to(DEVICE)


class Result:
    def __init__(self, ms, centroids, labels=None, **extra):
        """labels: the implementation's own final labels (a CUDA int64 tensor), where it gives them."""
        self.ms, self.centroids, self.labels, self.extra = ms, centroids, labels, extra


def run_skinny(ctx, x, c0, k, mode, iters, warmup) -> Result:
    import numpy as np
    torch, skinny = ctx["torch"], ctx["skinny"]
    c0_host = c0.cpu().numpy()

    def fit(max_iter):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # skinny allocates outside torch's cache: let it see the free memory
        km = skinny.KMeans(n_clusters=k, init=c0_host, n_init=1, max_iter=max_iter, tol=0.0, math=mode,
                           stop_when_stable=False)
        return km.fit(x)

    if warmup:
        fit(warmup)
    km = fit(iters)
    ms = [float(v) for v in km.iteration_ms_]
    extra = {"inertia_reported": float(km.inertia_), "n_iter_reported": int(getattr(km, "n_iter_", len(ms)))}
    if len(ms) != iters:
        extra["note"] = f"iteration_ms_ holds {len(ms)} iterations, not {iters}"
    labels = torch.from_numpy(np.asarray(km.labels_).astype(np.int64)).to(DEVICE)
    return Result(ms, as_cuda_float32(torch, km.cluster_centers_), labels, **extra)


def load_flash():
    """flash-kmeans' Triton path, or an exception saying why not. Its __init__ falls back to its PyTorch
    implementation silently when a Triton module fails to import (tqdm missing, say): refuse that."""
    import flash_kmeans
    from flash_kmeans import kmeans_triton_impl as impl
    from flash_kmeans.assign_euclid_triton import euclid_assign_triton
    from flash_kmeans.centroid_update_triton import triton_centroid_update_sorted_euclid
    if flash_kmeans.batch_kmeans_Euclid is not impl.batch_kmeans_Euclid:
        raise ImportError("flash_kmeans.batch_kmeans_Euclid is its PyTorch fallback, not the Triton path")
    body = getattr(impl, "_euclid_iter_compiled", None) or getattr(impl, "_euclid_iter", None)
    name = "flash_kmeans.kmeans_triton_impl._euclid_iter"
    if body is None:  # the same three steps from the public functions
        name = "euclid_assign_triton + triton_centroid_update_sorted_euclid + shift (composed here)"

        def body(x, x_sq, c, use_heuristic=True):
            ids = euclid_assign_triton(x, c, x_sq, use_heuristic=use_heuristic)
            c_new = triton_centroid_update_sorted_euclid(x, ids, c)
            return c_new, (c_new - c).norm(dim=-1).max(), ids
    return {"fit": impl.batch_kmeans_Euclid, "iterate": body, "iterate_name": name}


def flash_row_norms(torch, x3):
    """||x||^2 as batch_kmeans_Euclid makes it: in X's dtype, 2^20 rows at a time."""
    b, n, _ = x3.shape
    x_sq = torch.empty((b, n), device=x3.device, dtype=x3.dtype)
    step = 1 << 20
    for i in range(0, n, step):
        x_sq[:, i:i + step] = (x3[:, i:i + step] ** 2).sum(dim=-1)
    return x_sq


def run_flash(ctx, x, c0, k, mode, iters, warmup) -> Result:
    torch, fk = ctx["torch"], ctx["flash"]
    if isinstance(fk, Exception):
        raise RuntimeError(f"flash-kmeans unavailable: {fk}")
    x3 = x.unsqueeze(0)
    c_init = c0.to(x.dtype).unsqueeze(0).contiguous()
    x_sq = flash_row_norms(torch, x3)
    extra = {"flash_iteration": fk["iterate_name"]}
    if not bool(torch.isfinite(x_sq).all()):
        extra["note"] = "||x||^2 overflows the input dtype in flash-kmeans: its distances are inf"

    def iterate(c):
        c_new, shift, _ = fk["iterate"](x3, x_sq, c, True)
        return c_new.clone(), shift

    c = c_init
    for _ in range(warmup):
        c, shift = iterate(c)
        bool(shift < 0.0)
    torch.cuda.synchronize()
    starts, stops = new_events(torch, iters)
    c = c_init
    for i in range(iters):
        starts[i].record()
        c, shift = iterate(c)
        stops[i].record()
        bool(shift < 0.0)  # the library loop's `center_shift < tol` with tol = 0: a sync, never true
    ms = event_ms(torch, starts, stops)
    final = c[0].float()

    if ctx["args"].flash_fit_check and iters > 1:
        def fit(max_iters):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            _, cents, ran = fk["fit"](x3, k, max_iters=max_iters, tol=0.0, init_centroids=c_init.clone(),
                                      verbose=False)
            stop.record()
            torch.cuda.synchronize()
            return start.elapsed_time(stop), cents, ran
        t1, _, _ = fit(1)
        tm, cents, ran = fit(iters)
        extra["fit_ms_per_iter"] = (tm - t1) / (iters - 1)
        extra["fit_iterations"] = int(ran)
        extra["fit_centroid_max_diff"] = float((cents[0].float() - final).abs().max())
    return Result(ms, final, **extra)


def probe_half_gemm(torch):
    """How this PyTorch gives a float32 result from float16/bfloat16 GEMM inputs: addmm or mm with out_dtype
    (PyTorch >= 2.8 on CUDA), else a GEMM in the input dtype widened afterwards (the cross term is then
    rounded to the input dtype: said in the JSON)."""
    ah = torch.randn(64, 32, device=DEVICE).half()
    bh = torch.randn(32, 48, device=DEVICE).half()
    bias = torch.randn(48, device=DEVICE)
    ref = torch.addmm(bias.double(), ah.double(), bh.double(), alpha=-2.0).float()
    for name in ("addmm_out_dtype", "mm_out_dtype"):
        try:
            if name == "addmm_out_dtype":
                out = torch.addmm(bias, ah, bh, alpha=-2.0, out_dtype=torch.float32)
            else:
                out = torch.mm(ah, bh, out_dtype=torch.float32).mul_(-2.0).add_(bias)
            if out.dtype == torch.float32 and torch.allclose(out, ref, rtol=1e-2, atol=1e-1):
                return name
        except (TypeError, RuntimeError):
            pass
    return "widened"


class TorchLloyd:
    """Lloyd iterations in plain PyTorch, chunked over rows to bound the n x k distance matrix."""

    def __init__(self, torch, x, k, mode, chunk_bytes, half_gemm):
        self.torch, self.x, self.k, self.half_gemm = torch, x, k, half_gemm
        self.n, self.d = x.shape
        self.half = x.dtype != torch.float32
        self.fast = mode == "fast"
        self.rows = chunk_rows(self.n, 4 * (k + self.d), chunk_bytes)
        self.labels = torch.empty(self.n, device=DEVICE, dtype=torch.long)

    def _precision(self, tf32: bool):
        self.torch.set_float32_matmul_precision("high" if tf32 else "highest")

    def _gemm(self, a, b, bias=None, alpha=1.0):
        """bias + alpha * a @ b as float32, accumulating in float32."""
        torch = self.torch
        if a.dtype == torch.float32:
            return torch.addmm(bias, a, b, alpha=alpha) if bias is not None else torch.mm(a, b)
        if self.half_gemm == "addmm_out_dtype" and bias is not None:
            return torch.addmm(bias, a, b, alpha=alpha, out_dtype=torch.float32)
        if self.half_gemm in ("addmm_out_dtype", "mm_out_dtype"):
            out = torch.mm(a, b, out_dtype=torch.float32)
        else:
            out = torch.mm(a, b).float()
        if alpha != 1.0:
            out.mul_(alpha)
        return out.add_(bias) if bias is not None else out

    def iterate(self, c):
        torch, x, k, rows = self.torch, self.x, self.k, self.rows
        cg = c.to(x.dtype)  # the centres as the GEMM sees them
        c_sq = cg.float().pow(2).sum(1)
        cg_t = cg.t()
        self._precision(self.fast)
        for r0 in range(0, self.n, rows):
            dist = self._gemm(x[r0:r0 + rows], cg_t, c_sq, alpha=-2.0)  # ||c||^2 - 2 x.c
            self.labels[r0:r0 + rows] = dist.argmin(1)
        del dist
        self._precision(False)  # the sums in IEEE float32
        counts = torch.bincount(self.labels, minlength=k)
        sums = torch.zeros(k, self.d, device=DEVICE, dtype=torch.float32)
        onehot_ok = k <= ONEHOT_MAX_K and (not self.half or self.half_gemm != "widened")
        for r0 in range(0, self.n, rows):
            xc, lab = x[r0:r0 + rows], self.labels[r0:r0 + rows]
            if onehot_ok:
                onehot = torch.zeros(k, xc.shape[0], device=DEVICE, dtype=x.dtype)
                onehot.scatter_(0, lab[None, :], 1.0)
                sums += self._gemm(onehot, xc)
            else:
                sums.index_add_(0, lab, xc.float() if self.half else xc)
        mean = sums / counts.clamp(min=1)[:, None].float()
        return torch.where((counts > 0)[:, None], mean, c)


def run_torch(ctx, x, c0, k, mode, iters, warmup) -> Result:
    torch = ctx["torch"]
    lloyd = TorchLloyd(torch, x, k, mode, ctx["args"].chunk_bytes, ctx["half_gemm"])
    c = c0.clone()
    for _ in range(warmup):
        c = lloyd.iterate(c)
    torch.cuda.synchronize()
    starts, stops = new_events(torch, iters)
    c = c0.clone()
    for i in range(iters):
        starts[i].record()
        c = lloyd.iterate(c)
        stops[i].record()
    ms = event_ms(torch, starts, stops)
    torch.set_float32_matmul_precision("highest")
    extra = {"chunk_rows": lloyd.rows, "update": "one-hot GEMM" if k <= ONEHOT_MAX_K else "index_add_"}
    if x.dtype != torch.float32:
        extra["half_gemm"] = ctx["half_gemm"]
    return Result(ms, c, **extra)


RUNNERS = {"skinny": run_skinny, "flash": run_flash, "torch": run_torch}


# ------------------------------------------------------------------------------------------ bookkeeping

def git_commit() -> str:
    if os.environ.get("SKINNY_GIT_COMMIT"):
        return os.environ["SKINNY_GIT_COMMIT"]
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_version(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "not installed"


def driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def make_meta(args, ctx) -> dict:
    torch = ctx["torch"]
    props = torch.cuda.get_device_properties(0)
    triton_f32 = os.environ.get("TRITON_F32_DEFAULT")
    driver = driver_version()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": {"name": props.name, "sms": props.multi_processor_count,
                   "memory_gib": round(props.total_memory / GIB, 2), "driver": driver,
                   "cuda_runtime": torch.version.cuda},
        "driver": driver,
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "triton": package_version("triton"), "flash-kmeans": package_version("flash-kmeans"),
                     "skinny": getattr(ctx["skinny"], "__version__", None) or package_version("skinny"),
                     "numpy": package_version("numpy")},
        "git_commit": git_commit(),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "settings": {"iters": args.iters, "warmup": args.warmup, "min_iters": args.min_iters,
                     "impl_seconds": args.impl_seconds, "seed": args.seed, "blobs": args.blobs,
                     "blob_sigma": BLOB_SIGMA, "chunk_mib": args.chunk_bytes >> 20,
                     "time_budget_s": args.time_budget, "flash_fit_check": args.flash_fit_check},
        "precision": {
            "skinny": "math='exact' or 'fast' as skinny.KMeans implements them; centroids as skinny returns them",
            "flash-kmeans": ("Triton tl.dot with its default input precision: float32 inputs run on TF32 tensor "
                             f"cores (TRITON_F32_DEFAULT={triton_f32 or 'unset, so tf32'}); float16/bfloat16 on "
                             "tensor cores; float32 accumulation, distances and argmin in float32; ||x||^2 and the "
                             "centroids kept in the input dtype between iterations; centroid sums with float32 "
                             "atomics (not deterministic); one run per dtype (mode 'any')"),
            "torch": ("addmm per row chunk, ||c||^2 - 2 X C^T (||x||^2 dropped: constant per row), float32 result; "
                      "float32 input: 'exact' = IEEE float32 GEMM, 'fast' = TF32; float16/bfloat16: tensor cores, "
                      f"float32 accumulation, one run (mode 'any'), float32 result through '{ctx['half_gemm']}'; "
                      f"sums in float32 (one-hot GEMM for k <= {ONEHOT_MAX_K}, else index_add_), centroids float32"),
            "inertia": "float64 on the GPU from each implementation's final centroids, same function for all",
        },
        "timing": ("median of per-iteration CUDA-event times after warm-up; skinny: KMeans.iteration_ms_; "
                   f"flash-kmeans: events around {ctx['flash_iteration']} + the loop's clone, per iteration "
                   "(fit_ms_per_iter: whole batch_kmeans_Euclid fits, max_iters = iters minus max_iters = 1, over "
                   "iters - 1); torch: events around each iteration of TorchLloyd"),
        "data": (f"Gaussian blobs: {args.blobs} centres uniform in [-1, 1]^d, sigma {BLOB_SIGMA}, labels uniform; "
                 "made on the GPU in float32 from the seed, rounded to the dtype; initial centroids: k distinct "
                 "rows of X drawn with numpy default_rng([seed, n, k])"),
    }


def row_precision(impl: str, mode: str, dtype: str) -> str:
    """What a row's distance GEMM ran in, as far as this script knows it (meta.precision says more)."""
    if impl == "skinny":
        return f"skinny math='{mode}'"
    if dtype == "float32":
        return "tf32 (Triton default)" if impl == "flash" else ("ieee float32" if mode == "exact" else "tf32")
    return f"{dtype} tensor cores, float32 accumulation"


def write_json(path: str, doc: dict) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def row(n, d, k, dtype, impl, mode, status, reason=None, **fields) -> dict:
    out = {"n": n, "d": d, "k": k, "dtype": dtype, "mode": mode, "impl": impl, "ms_per_iter": None,
           "inertia": None, "status": status, "reason": reason}
    out.update(fields)
    return out


def add_ratios(rows: list) -> None:
    """ratio_vs_flash and ratio_vs_torch on skinny's ok rows of one shape."""
    ok = {(r["impl"], r["mode"]): r for r in rows if r["status"] == "ok"}
    for r in rows:
        if r["impl"] != "skinny" or r["status"] != "ok":
            continue
        for impl in ("flash", "torch"):
            other = ok.get((impl, r["mode"])) or ok.get((impl, "any"))
            if other and other["ms_per_iter"]:
                r[f"ratio_vs_{impl}"] = r["ms_per_iter"] / other["ms_per_iter"]


def grid_targets(rows: list) -> dict:
    """Issue 20's grid criteria over every shape where skinny's two modes and flash-kmeans all ran: skinny's
    time against flash-kmeans's (fast <= 0.6x, exact <= 0.9x, fast's geometric mean <= 0.5x), the runs
    slower than the PyTorch Lloyd, fast mode's inertia within 1e-5 (relative) of exact mode's after the
    iterations, and fast mode's labels within 1e-5 of the best inertia at its own centres (label_excess;
    counted over the shapes whose fast row carries it)."""
    shapes = {}
    for r in rows:
        if r["status"] == "ok":
            shapes.setdefault((r["n"], r["d"], r["k"], r["dtype"]), {})[(r["impl"], r["mode"])] = r
    t = {"shapes": 0, "fast_within_0.6": 0, "exact_within_0.9": 0, "fast_geomean": None, "exact_geomean": None,
         "slower_than_torch": [], "inertia_within_1e-5": 0, "labels_checked": 0, "labels_within_1e-5": 0}
    logs = {"fast": [], "exact": []}
    for (n, d, k, dtype), runs in sorted(shapes.items()):
        for mode in ("fast", "exact"):
            mine = runs.get(("skinny", mode))
            torch_run = runs.get(("torch", mode)) or runs.get(("torch", "any"))
            if mine and torch_run and mine["ms_per_iter"] > torch_run["ms_per_iter"]:
                t["slower_than_torch"].append({"n": n, "d": d, "k": k, "dtype": dtype, "mode": mode,
                                               "ratio": mine["ms_per_iter"] / torch_run["ms_per_iter"]})
        fast, exact = runs.get(("skinny", "fast")), runs.get(("skinny", "exact"))
        flash = next((r for (impl, _), r in runs.items() if impl == "flash"), None)
        if not (fast and exact and flash):
            continue
        t["shapes"] += 1
        t["fast_within_0.6"] += fast["ms_per_iter"] <= 0.6 * flash["ms_per_iter"]
        t["exact_within_0.9"] += exact["ms_per_iter"] <= 0.9 * flash["ms_per_iter"]
        logs["fast"].append(math.log(fast["ms_per_iter"] / flash["ms_per_iter"]))
        logs["exact"].append(math.log(exact["ms_per_iter"] / flash["ms_per_iter"]))
        t["inertia_within_1e-5"] += abs(fast["inertia"] - exact["inertia"]) <= 1e-5 * abs(exact["inertia"])
        if fast.get("label_excess") is not None:
            t["labels_checked"] += 1
            t["labels_within_1e-5"] += fast["label_excess"] <= 1e-5
    for mode, values in logs.items():
        if values:
            t[f"{mode}_geomean"] = math.exp(sum(values) / len(values))
    return t


def print_targets(t: dict) -> None:
    if not t["shapes"]:
        return
    print(f"targets (issue 20) over {t['shapes']} shapes: fast <= 0.6x flash-kmeans on {t['fast_within_0.6']}, "
          f"exact <= 0.9x on {t['exact_within_0.9']}; geometric mean fast {t['fast_geomean']:.3f}, exact "
          f"{t['exact_geomean']:.3f}; fast inertia within 1e-5 of exact on {t['inertia_within_1e-5']}"
          + (f"; fast labels within 1e-5 of the best at their centres on {t['labels_within_1e-5']} of "
             f"{t['labels_checked']}" if t["labels_checked"] else ""))
    slower = ", ".join(f"{s['dtype']} d={s['d']} k={s['k']} {s['mode']} ({s['ratio']:.2f}x)"
                       for s in t["slower_than_torch"])
    print(f"targets (issue 20): slower than the PyTorch Lloyd: {slower or 'none'}")


def print_shape(rows: list) -> None:
    print(f"  {'impl':7} {'mode':6} {'ms/iter':>10} {'min':>9} {'inertia (fp64)':>16}  note")
    for r in rows:
        if r["status"] == "ok":
            note = r.get("note", "")
            if "fit_ms_per_iter" in r:
                note = f"fit: {r['fit_ms_per_iter']:.3f} ms/iter " + note
            if "label_excess" in r:
                note = f"own labels +{r['label_excess']:.1e} " + note
            print(f"  {r['impl']:7} {r['mode']:6} {r['ms_per_iter']:10.3f} {r['ms_min']:9.3f} "
                  f"{r['inertia']:16.8e}  {note}")
        else:
            print(f"  {r['impl']:7} {r['mode']:6} {r['status'].upper():>10}  {r['reason']}")
    ratios = []
    for r in rows:
        parts = [f"skinny/{impl} {r['ratio_vs_' + impl]:.2f}" for impl in ("flash", "torch") if "ratio_vs_" + impl in r]
        if parts:
            ratios.append(f"{r['mode']}: " + ", ".join(parts))
    if ratios:
        print("  ratio  " + "; ".join(ratios))


def run_benchmark(args) -> int:
    import numpy as np
    try:
        import torch
    except ImportError as e:
        raise SystemExit(f"kmeans_bench: needs PyTorch with CUDA ({e}); --dry-run needs neither")
    if not torch.cuda.is_available():
        raise SystemExit("kmeans_bench: no CUDA device visible (--dry-run shows the grid without one)")
    ctx = {"torch": torch, "args": args, "skinny": None, "flash": None, "flash_iteration": "-"}
    if "skinny" in args.impls:
        ctx["skinny"] = check_skinny_api()
    if "flash" in args.impls:
        try:
            ctx["flash"] = load_flash()
            ctx["flash_iteration"] = ctx["flash"]["iterate_name"]
        except Exception as e:  # recorded on every flash row; the other implementations still run
            ctx["flash"] = e
            print(f"WARNING: flash-kmeans unavailable ({type(e).__name__}: {e}); install the carried wheel: "
                  f"pip install --no-deps --no-index .wheels/*.whl", flush=True)
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(torch.backends.cuda.matmul, flag):
            setattr(torch.backends.cuda.matmul, flag, False)
    ctx["half_gemm"] = probe_half_gemm(torch)

    _, total = torch.cuda.mem_get_info()
    usable = args.gpu_mem_gib * GIB if args.gpu_mem_gib else total - int(1.5 * GIB)
    meta = make_meta(args, ctx)
    meta["device"]["usable_gib_assumed"] = round(usable / GIB, 2)
    if args.resume:
        meta["resumed_from"] = {"json": args.resume, "finished_shapes": len(args.done)}
    doc = {"benchmark": "kmeans-vs-flash", "date": meta["date"], "meta": meta, "rows": []}
    print(f"kmeans_bench on {meta['device']['name']} (driver {meta['driver']}, torch {meta['versions']['torch']}, "
          f"triton {meta['versions']['triton']}, flash-kmeans {meta['versions']['flash-kmeans']}, skinny "
          f"{meta['versions']['skinny']}, commit {meta['git_commit']}); half GEMM path: {ctx['half_gemm']}", flush=True)

    shapes = enumerate_shapes(args, usable)
    started = time.monotonic()
    x, x_key = None, None
    failures = 0
    for n, d, dtype, k, runs, reason, iters, est in shapes:
        carried = carried_rows(args, n, d, k, dtype, runs) if reason is None else None
        if carried is not None:
            doc["rows"] += carried
            print(f"n={n} d={d} k={k} {dtype}: carried over from {args.resume}", flush=True)
            continue
        if reason is None:
            data = est_data_s(n, d) if x_key != (n, d, dtype) else 0.0
            reason = time_budget_reason(args, time.monotonic() - started, est + data)
        if reason is not None:
            doc["rows"] += [row(n, d, k, dtype, i, m, "skipped", reason) for i, m in runs]
            print(f"n={n} d={d} k={k} {dtype}: skipped ({reason})", flush=True)
            continue
        if x_key != (n, d, dtype):
            x = None
            torch.cuda.empty_cache()
            x = make_blobs(torch, n, d, dtype, args.blobs, args.seed)
            x_key = (n, d, dtype)
        print(f"n={n} d={d} k={k} {dtype}, {iters} iterations (+{args.warmup} warm-up), "
              f"{time.monotonic() - started:.0f} s in", flush=True)
        c0 = initial_centroids(torch, x, k, args.seed)
        shape_rows = []
        for impl, mode in runs:
            t0 = time.monotonic()
            try:
                res = RUNNERS[impl](ctx, x, c0, k, mode, iters, args.warmup)
                ms = np.asarray(res.ms, dtype=np.float64)
                inertia = inertia64(torch, x, res.centroids, args.chunk_bytes)
                r = row(n, d, k, dtype, impl, mode, "ok", iters=iters, ms_per_iter=float(np.median(ms)),
                        ms_min=float(ms.min()), ms_max=float(ms.max()), inertia=inertia,
                        precision=row_precision(impl, mode, dtype), **res.extra)
                if res.labels is not None and inertia > 0:
                    try:  # a failed label check is noted in the row; the timing stands
                        own = inertia64_of_labels(torch, x, res.centroids, res.labels, args.chunk_bytes)
                        r["inertia_own_labels"], r["label_excess"] = own, own / inertia - 1.0
                    except Exception as e:
                        r["label_check_error"] = f"{type(e).__name__}: {e}"[:300]
                del res
            except Exception as e:  # one failure is a row, not the end of the run
                oom = isinstance(e, (MemoryError, torch.cuda.OutOfMemoryError)) or "out of memory" in str(e)
                r = row(n, d, k, dtype, impl, mode, "oom" if oom else "error", f"{type(e).__name__}: {e}"[:500],
                        iters=iters)
                failures += 0 if oom else 1
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            r["wall_s"] = round(time.monotonic() - t0, 2)
            shape_rows.append(r)
        add_ratios(shape_rows)
        print_shape(shape_rows)
        sys.stdout.flush()
        doc["rows"] += shape_rows
        write_json(args.json, doc)
    doc["elapsed_s"] = round(time.monotonic() - started, 1)
    doc["targets"] = grid_targets(doc["rows"])
    write_json(args.json, doc)
    ok = sum(r["status"] == "ok" for r in doc["rows"])
    skipped = sum(r["status"] == "skipped" for r in doc["rows"])
    print(f"summary: {ok} runs ok, {skipped} skipped, {failures} errors, "
          f"{sum(r['status'] == 'oom' for r in doc['rows'])} out of memory; {doc['elapsed_s']:.0f} s"
          + (f"; JSON {args.json}" if args.json else ""))
    ratios = [r["ratio_vs_flash"] for r in doc["rows"] if "ratio_vs_flash" in r]
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"summary: skinny/flash-kmeans time ratio over {len(ratios)} runs: geometric mean {geo:.2f}, "
              f"min {min(ratios):.2f}, max {max(ratios):.2f} (below 1: skinny faster)")
    print_targets(doc["targets"])
    return 1 if failures else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Method, timing and precision: see the header of bench/kmeans_bench.py.")
    p.add_argument("--n", type=parse_sizes, default=DEFAULT_N, help="points, comma-separated (2^20 and 1M work)")
    p.add_argument("--d", type=parse_sizes, default=DEFAULT_D, help="dimensions, comma-separated")
    p.add_argument("--k", type=parse_sizes, default=DEFAULT_K, help="clusters, comma-separated")
    p.add_argument("--dtypes", type=parse_choices(DTYPES, DTYPE_ALIASES), default=list(DTYPES),
                   help="float32,float16,bfloat16 (fp32, fp16, bf16 work)")
    p.add_argument("--modes", type=parse_choices(MODES), default=list(MODES), help="skinny's math: exact,fast")
    p.add_argument("--impls", type=parse_choices(IMPLS), default=list(IMPLS), help="skinny,flash,torch")
    p.add_argument("--skip-competitors", action="store_true", help="skinny alone (same as --impls skinny)")
    p.add_argument("--iters", type=int, default=20, help="timed Lloyd iterations per run (default 20)")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations before them (default 2)")
    p.add_argument("--min-iters", type=int, default=3,
                   help="fewest timed iterations when --impl-seconds cuts a shape's count (default 3)")
    p.add_argument("--impl-seconds", type=float, default=10.0,
                   help="cut a shape's iterations so that the slowest run takes about this long by the estimate "
                        "(default 10)")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="skip (and record) the shapes left once this much time has passed, or would pass by the "
                        "estimate")
    p.add_argument("--json", default=None, metavar="OUT", help="write the results here (rewritten after each shape)")
    p.add_argument("--resume", default=None, metavar="EARLIER",
                   help="carry over the shapes an earlier run of the same commit finished (its JSON) and run the rest")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--blobs", type=int, default=256, help="Gaussian blobs in the data (default 256)")
    p.add_argument("--chunk-mib", type=int, default=1024,
                   help="row-chunk work space of the PyTorch Lloyd and of the inertia, MiB (default 1024)")
    p.add_argument("--gpu-mem-gib", type=float, default=None,
                   help="usable GPU memory for the skip rule (default: the device's total less 1.5 GiB; "
                        "--dry-run: 79)")
    p.add_argument("--no-flash-fit-check", dest="flash_fit_check", action="store_false",
                   help="skip timing flash-kmeans' whole fit as a check of the per-iteration loop")
    p.add_argument("--dry-run", action="store_true", help="print the grid, skips and estimates; import no CUDA")
    p.add_argument("--check-api", action="store_true",
                   help="exit 0 if the installed skinny has the API this benchmark uses, 3 otherwise")
    args = p.parse_args(argv)
    if args.skip_competitors:
        args.impls = ["skinny"]
    if args.iters < 1 or args.warmup < 0 or args.min_iters < 1:
        p.error("--iters and --min-iters must be >= 1, --warmup >= 0")
    args.chunk_bytes = max(1, args.chunk_mib) << 20
    args.resumed_commit, args.done = None, {}
    if args.resume:
        try:
            args.resumed_commit, args.done = finished_shapes(args.resume)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            p.error(f"--resume {args.resume}: cannot read it as a kmeans_bench JSON ({type(e).__name__}: {e})")
    if args.check_api:
        try:
            check_skinny_api()
        except SystemExit as e:
            print(e, file=sys.stderr)
            return 3
        print("skinny has KMeans(math=..., stop_when_stable=...)")
        return 0
    if args.dry_run:
        dry_run(args)
        return 0
    if args.resume and args.resumed_commit != git_commit():
        p.error(f"--resume {args.resume} was measured at commit {args.resumed_commit}, this run is {git_commit()}: "
                "two builds' results would mix in one grid")
    return run_benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
