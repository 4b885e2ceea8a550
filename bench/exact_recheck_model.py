#!/usr/bin/env python3
"""A host model of exact mode's one-product certificate on the K-means benchmark's data, to size a cheaper
re-check before building it. It runs a few Lloyd iterations (float64, NumPy) on a sample of the benchmark's
blobs (kmeans_bench.py's generator: --blobs centres uniform in [-1, 1]^d, sigma 0.1), then, for the centres
of the last iteration, models the fused kernel's one product per term (float points truncated to TF32 and
centres rounded to TF32; 16-bit points as they are, centres rounded to their type) and gemm::nearest's
certificate (gemm/src/nearest.cu: certificate_bound, certified, recertify_kernel). It reports:

- re-checked: the points whose best two one-product values are too close to certify (after the float
  points' second certificate with their own ||x^ - x||): what exact mode runs again today, with three
  products per term, for every centre;
- the window: for those points, the centres whose one-product value is within the certificate's margin
  of the best. Every centre outside it is farther than the best (the same triangle-inequality argument as
  the certificate), so the exact argmin over the window alone is the exact argmin. Its size says what a
  re-check of a few exact distances per point (instead of three products against all k centres) would
  cost, and how many points a list of a given capacity would hold.

It models the bound, not the GPU's float sums (their error is inside the bound), and a sample of n points
(the benchmark's Lloyd runs on 2^20 or more): the shares are estimates.

    python3 bench/exact_recheck_model.py --n 131072 --d 128 --k 1024
"""
import argparse
import math

import numpy as np

BLOB_SIGMA = 0.1


def tf32_truncated(a: np.ndarray) -> np.ndarray:
    """float32 values with the 13 low significand bits cleared (how the tensor cores take float points)."""
    return (a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_rounded(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32's 10 significand bits, to nearest (how centre_parts_kernel rounds)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x1000 + ((u >> 13) & 1) - 1) & 0xFFFFE000  # to nearest, ties to even
    return u.astype(np.uint32).view(np.float32)


def bf16_rounded(a: np.ndarray) -> np.ndarray:
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def rounded_to(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        return bf16_rounded(a)
    return a.astype(np.float32)


def blobs(n: int, d: int, count: int, dtype: str, rng: np.random.Generator) -> np.ndarray:
    centres = rng.random((count, d), dtype=np.float32) * 2 - 1
    labels = rng.integers(count, size=n)
    x = centres[labels] + BLOB_SIGMA * rng.standard_normal((n, d), dtype=np.float32)
    return rounded_to(x, dtype)


def lloyd(x: np.ndarray, k: int, iters: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct rows of x as the start (the benchmark's rule), then `iters` Lloyd iterations in float64."""
    c = x[rng.choice(x.shape[0], size=k, replace=False)].astype(np.float64)
    x64 = x.astype(np.float64)
    for _ in range(iters):
        labels = nearest(x64, c)
        sums = np.zeros_like(c)
        np.add.at(sums, labels, x64)
        counts = np.bincount(labels, minlength=k)
        filled = counts > 0
        c[filled] = sums[filled] / counts[filled, None]
    return c.astype(np.float32)


def nearest(x: np.ndarray, c: np.ndarray, chunk: int = 8192) -> np.ndarray:
    cn = (c * c).sum(1)
    out = np.empty(x.shape[0], dtype=np.int64)
    for r0 in range(0, x.shape[0], chunk):
        out[r0:r0 + chunk] = np.argmin(cn[None, :] - 2 * x[r0:r0 + chunk] @ c.T, axis=1)
    return out


def model(x: np.ndarray, c: np.ndarray, dtype: str, caps: list, chunk: int = 4096) -> dict:
    n, d = x.shape
    k = c.shape[0]
    is_float = dtype == "float32"
    u_x = 2.0 ** -10 if is_float else 0.0
    u_c = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    lin = 2.0 ** -25 if dtype == "float16" else 2.0 ** -120
    sums = (d + 16) * 2.0 ** -23
    x_hat = tf32_truncated(x) if is_float else x
    c_hat = tf32_rounded(c) if is_float else rounded_to(c, dtype)
    c64, ch64 = c.astype(np.float64), c_hat.astype(np.float64)
    c_sq = (c64 * c64).sum(1)
    c_norm = math.sqrt(float(c_sq.max()))
    c_error = math.sqrt(float(((ch64 - c64) ** 2).sum(1).max()))
    c_rounded = c_norm * (1 + u_c) + lin * math.sqrt(d)
    cn_hat = (ch64 * ch64).sum(1)
    rechecked = near_ties = 0
    window_sizes = []
    flagged_best, flagged_reach = [], []  # per re-checked point: its one-product best centre, 2 ||x - c_b||
    for r0 in range(0, n, chunk):
        xs = x[r0:r0 + chunk].astype(np.float64)
        xh = x_hat[r0:r0 + chunk].astype(np.float64)
        v = cn_hat[None, :] - 2 * xh @ ch64.T  # one product per term, exact sums
        x_sq = (xs * xs).sum(1)
        x_norm = np.sqrt(x_sq)
        two = np.partition(v, 1, axis=1)[:, :2]
        best, second = two[:, 0], two[:, 1]
        e = 2.0 ** -22 * c_rounded ** 2 + (2 * sums + 2.0 ** -21) * x_norm * c_rounded
        shift = (2 * u_x + 2.0 ** -20) * x_sq
        near = np.sqrt(np.maximum(x_sq + best + shift + e, 0))
        far = np.sqrt(np.maximum(x_sq + second + shift - e, 0))
        r_bound = u_x * x_norm + c_error + lin * math.sqrt(d)
        left = ~(far - near > 2 * r_bound * (1 + 2.0 ** -10))
        if is_float and k >= 1024:  # recertify_kernel: the point's own ||x^ - x||
            own = np.sqrt(((xh - xs) ** 2).sum(1)) + c_error + lin * math.sqrt(d)
            left &= ~(far - near > 2 * own * (1 + 2.0 ** -10))
            r_bound = np.where(left, own, r_bound)
        rechecked += int(left.sum())
        # Near ties for three products: the exact best two within twice its error bound (nearest.cu's
        # three_product_error); the re-check among neighbours sends those to the three-product kernel.
        exact = c_sq[None, :] - 2 * xs[left] @ c64.T
        pair = np.partition(exact, 1, axis=1)[:, :2]
        cross = ((3 * d + 16) * 2.0 ** -23 + 2.0 ** -21) * x_norm[left] * c_norm
        three_error = 2 * (2.0 ** -19 * c_norm ** 2 + 2.0 ** -24 * 2 * x_norm[left] * c_norm + 2 * cross)
        near_ties += int((pair[:, 1] - pair[:, 0] <= 2 * three_error).sum())
        b = np.argmin(v[left], axis=1)
        flagged_best.append(b)
        flagged_reach.append(2 * np.sqrt(((xs[left] - c64[b]) ** 2).sum(1)))
        if left.any():
            margin = 2 * r_bound[left] * (1 + 2.0 ** -10)
            threshold = (near[left] + margin) ** 2 - x_sq[left] - shift[left] + e[left]
            window_sizes.append((v[left] <= threshold[:, None]).sum(1))
    sizes = np.concatenate(window_sizes) if window_sizes else np.zeros(0, dtype=np.int64)
    out = {"n": n, "d": d, "k": k, "dtype": dtype, "rechecked_share": rechecked / n, "near_tie_share": near_ties / n}
    if rechecked:
        # The re-check among neighbours: centre b lists the centres within its radius (the largest reach of
        # its re-checked points); a point is settled there when b lists at most `cap` of them.
        best, reach = np.concatenate(flagged_best), np.concatenate(flagged_reach)
        radius = np.zeros(k)
        np.maximum.at(radius, best, reach)
        listed = np.zeros(k, dtype=np.int64)
        for b0 in range(0, k, 1024):
            pair_sq = c_sq[b0:b0 + 1024, None] + c_sq[None, :] - 2 * c64[b0:b0 + 1024] @ c64.T
            listed[b0:b0 + 1024] = (np.sqrt(np.maximum(pair_sq, 0)) <= radius[b0:b0 + 1024, None]).sum(1)
        out["neighbours_median"] = float(np.median(listed[best]))
        for cap in caps:
            out[f"neighbours_within_{cap}"] = float((listed[best] <= cap).mean())
    if sizes.size:
        out["window_median"] = float(np.median(sizes))
        out["window_max"] = int(sizes.max())
        for cap in caps:
            out[f"within_{cap}"] = float((sizes <= cap).mean())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=131072)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    p.add_argument("--blobs", type=int, default=256)
    p.add_argument("--iters", type=int, default=10, help="Lloyd iterations before the model (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--caps", default="4,8,16,32,64", help="list capacities to count the windows against")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    x = blobs(args.n, args.d, args.blobs, args.dtype, rng)
    c = lloyd(x, args.k, args.iters, rng)
    r = model(x, c, args.dtype, [int(v) for v in args.caps.split(",")])
    line = (f"n={r['n']} d={r['d']} k={r['k']} {r['dtype']} after {args.iters} iterations: "
            f"re-checked {100 * r['rechecked_share']:.1f} %, of which near ties for three products "
            f"{100 * r['near_tie_share']:.1f} %")
    if "window_median" in r:
        line += f"; their window: median {r['window_median']:.0f} centres, max {r['window_max']}; within " + ", ".join(
            f"{cap}: {100 * r[f'within_{cap}']:.1f} %" for cap in args.caps.split(","))
    if "neighbours_median" in r:
        line += (f"; their best centre's neighbours: median {r['neighbours_median']:.0f}, within " +
                 ", ".join(f"{cap}: {100 * r[f'neighbours_within_{cap}']:.1f} %" for cap in args.caps.split(",")))
    print(line)


if __name__ == "__main__":
    main()
