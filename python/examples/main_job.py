#!/usr/bin/env python3
"""The main job from Python: Lloyd K-means on 262144 x 4096 float32 Gaussian blobs, k = 16, on the GPU.
Prints the GPU milliseconds per Lloyd iteration (median, as the kmeans app reports them).

    python python/examples/main_job.py                      # blobs made on the GPU with CuPy or PyTorch
    python python/examples/main_job.py --data numpy --backend tsm2 --iters 20
"""

import argparse
import time

import numpy as np

import skinny


def blobs(library: str, n: int, d: int, k: int, seed: int):
    """n points in d dimensions, point i in blob i % k: centres uniform in [-10, 10]^d, unit variance."""
    if library == "cupy":
        import cupy
        rs = cupy.random.RandomState(seed)
        centres = rs.uniform(-10, 10, (k, d), dtype=cupy.float32)
        x = rs.standard_normal((n, d), dtype=cupy.float32)
        x += centres[cupy.arange(n) % k]
        return x, np.arange(n) % k
    if library == "torch":
        import torch
        g = torch.Generator(device="cuda").manual_seed(seed)
        centres = torch.rand(k, d, device="cuda", generator=g) * 20 - 10
        x = torch.randn(n, d, device="cuda", generator=g)
        x += centres[torch.arange(n, device="cuda") % k]
        return x, np.arange(n) % k
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, (k, d)).astype(np.float32)
    x = rng.standard_normal((n, d), dtype=np.float32)
    x += centres[np.arange(n) % k]
    return x, np.arange(n) % k


def first_available(choice: str) -> str:
    if choice != "auto":
        return choice
    for library in ("cupy", "torch"):
        try:
            __import__(library)
            return library
        except ImportError:
            pass
    return "numpy"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=262144)
    p.add_argument("--d", type=int, default=4096)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--iters", type=int, default=100, help="Lloyd iterations at most")
    p.add_argument("--tol", type=float, default=0.0,
                   help="stop at this tolerance (default 0: all --iters, for a steady median; the blobs converge in 2-3)")
    p.add_argument("--backend", default="auto", choices=skinny.algorithms())
    p.add_argument("--data", default="auto", choices=["auto", "cupy", "torch", "numpy"],
                   help="where the blobs are made (numpy: on the host, copied to the GPU by fit)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if not skinny.cuda_available():
        raise SystemExit("no CUDA device visible")

    library = first_available(args.data)
    t0 = time.perf_counter()
    x, truth = blobs(library, args.n, args.d, args.k, args.seed)
    print(f"blobs {args.n} x {args.d} float32, k = {args.k}, made with {library} in {time.perf_counter() - t0:.1f} s")

    km = skinny.KMeans(args.k, max_iter=args.iters, tol=args.tol, random_state=args.seed, backend=args.backend,
                       stop_when_stable=args.tol > 0)  # tol 0: all --iters, as the kmeans program on synthetic data
    t0 = time.perf_counter()
    km.fit(x)
    wall = time.perf_counter() - t0
    ms = km.iteration_ms_
    print(f"backend {args.backend}: {km.n_iter_} iterations, inertia {km.inertia_:.6e}, fit {wall:.2f} s wall")
    print(f"ms per iteration: median {np.median(ms):.3f}, min {ms.min():.3f}, mean {ms.mean():.3f}")
    try:
        from sklearn.metrics import adjusted_rand_score
        print(f"adjusted Rand index against the true blobs: {adjusted_rand_score(truth, km.labels_):.6f}")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
