#!/usr/bin/env bash
# Every benchmark of the suite in one command, on a machine with an NVIDIA GPU:
#   bench/run-all.sh OUTDIR [build]
# builds (Release, this GPU's architecture) unless a build exists, then runs the SGEMM ladder (float,
# half, double), TSM2 against cuBLAS and the read ceiling with the V0-V3 ablation, K-means end to end
# over n (the paper's Fig. 8: d = 4096, k = 16, 100 iterations, float and double, tsm2 and cuBLAS), the
# main job with --compare, the many-clusters case, and (when built) the ABFT encoding sweep and fault
# campaign, and K-means against flash-kmeans and a PyTorch Lloyd on a reduced grid (Python: skinny.KMeans,
# flash-kmeans from the wheels carried in .wheels/, see bench/README-kmeans.md). Each JSON records device,
# driver, CUDA version, date and git commit. Prints a table last; OUTDIR/results.tgz holds every JSON and log.
# Plot with: python3 bench/plot.py OUTDIR/json bench/figures (the K-means comparison: bench/plot_kmeans.py)
#   RUN_ALL_SKIP="ladder tsm2 kmeans kmeans_stream abft kmeans_vs_flash kmeans_scaling"   parts to skip
set -uo pipefail
out=${1:?usage: bench/run-all.sh OUTDIR [build]}
mkdir -p "$out/json" "$out/logs"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=build/gpu-check
skip=" ${RUN_ALL_SKIP:-} "
if [ ! -x "$build/apps/kmeans" ] || [ "${2:-}" = build ]; then
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native &&
    cmake --build "$build" -j "$(nproc)"; } >"$out/logs/build.log" 2>&1 || { tail -30 "$out/logs/build.log"; exit 1; }
fi
apps=$build/apps
summary=$out/summary.txt
: >"$summary"
failed=0
step() {  # step NAME COMMAND...: runs, logs, records failure
  local name=$1; shift
  if ! "$@" >"$out/logs/$name.log" 2>&1; then
    echo "FAILED: $name (exit $?), see logs/$name.log" | tee -a "$summary"
    tail -5 "$out/logs/$name.log"
    failed=1
  fi
}

if [[ $skip != *" ladder "* ]]; then
  for p in float half double; do
    step "gemm-bench_$p" "$apps/gemm-bench" --precision $p --json "$out/json/gemm-bench_$p.json"
  done
  grep -hE "^(cublas|vectorized|wmma) " "$out"/logs/gemm-bench_*.log | head -6 >>"$summary"
fi

if [[ $skip != *" tsm2 "* ]]; then
  step tsm2-bench "$apps/tsm2-bench" --json "$out/json/tsm2-bench.json"
  grep -E "ceiling|^(float|double) |geometric" "$out/logs/tsm2-bench.log" >>"$summary"
fi

if [[ $skip != *" kmeans "* ]]; then
  for p in float double; do
    for n in 1024 4096 16384 65536 262144; do
      for b in tsm2 cublas; do
        step "kmeans_${p}_${n}_$b" "$apps/kmeans" --n $n --d 4096 --k 16 --iters 100 --tol 0 \
          --precision $p --backend $b --json "$out/json/kmeans_${p}_${n}_$b.json"
      done
    done
  done
  for p in float double; do
    step "kmeans_main_compare_$p" "$apps/kmeans" --n 262144 --k 16 --backend tsm2 --precision $p --iters 20 --tol 0 \
      --compare --json "$out/json/kmeans_main_compare_$p.json"
  done
  # Many clusters: auto (the fused nearest kernel) against cuBLAS and the separate argmin.
  for b in auto cublas; do
    step "kmeans_many_clusters_$b" "$apps/kmeans" --n 1048576 --d 128 --k 1024 --iters 20 --tol 0 \
      --backend $b --json "$out/json/kmeans_many_clusters_$b.json"
  done
  # The README's main command exactly as written there (its per-iteration median must match the
  # --iters 100 --tol 0 run above).
  step kmeans_readme_main "$apps/kmeans" --n 262144 --k 16 --backend tsm2 --json "$out/json/kmeans_readme_main.json"
  python3 - "$out/json" >>"$summary" <<'PY'
import json, pathlib, sys
j = pathlib.Path(sys.argv[1])
def ms(name):
    f = j / f"{name}.json"
    return json.loads(f.read_text())["median_iteration_ms"] if f.exists() else float("nan")
print("K-means end to end, median ms per iteration (d = 4096, k = 16, 100 iterations):")
print(f"{'prec':7} {'n':>7} {'tsm2':>9} {'cublas':>9} {'speedup':>8}")
for p in ("float", "double"):
    for n in (1024, 4096, 16384, 65536, 262144):
        t, c = ms(f"kmeans_{p}_{n}_tsm2"), ms(f"kmeans_{p}_{n}_cublas")
        print(f"{p:7} {n:7} {t:9.3f} {c:9.3f} {c / t:7.2f}x")
readme, fixed = ms("kmeans_readme_main"), ms("kmeans_float_262144_tsm2")
print(f"README main command: {readme:.3f} ms per iteration; --iters 100 --tol 0: {fixed:.3f} ms ({readme / fixed:.3f}x)")
for p in ("float", "double"):
    f = j / f"kmeans_main_compare_{p}.json"
    if f.exists():
        runs = json.loads(f.read_text())["compare"]
        print(f"main job --compare, {p}: " + ", ".join(
            f"{r['backend']} {r['median_iteration_ms']:.3f}" for r in runs if r["supported"]))
for b in ("auto", "cublas"):
    print(f"many clusters (1048576 x 128, k = 1024), {b}: {ms('kmeans_many_clusters_' + b):.3f} ms per iteration")
PY
fi

# K-means on data larger than the GPU memory it may use (issue 21): 2^28 x 32 float (32 GiB) generated in
# host memory, streamed through 8 GiB, from pageable memory (staging threads) and from pinned memory; each
# run measures the pinned-copy ceiling itself. Needs about 34 GiB of host memory.
if [[ $skip != *" kmeans_stream "* ]]; then
  for mem in pageable pinned; do
    step "kmeans_stream_$mem" "$apps/kmeans" --n 268435456 --d 32 --k 16 --iters 10 --max-gpu-memory 8G \
      --host-memory $mem --json "$out/json/kmeans_stream_$mem.json"
  done
  python3 - "$out/json" >>"$summary" <<'PY'
import json, pathlib, sys
j = pathlib.Path(sys.argv[1])
print("K-means streamed from host memory, 2^28 x 32 float through 8 GiB (target: >= 80 % of the pinned-copy ceiling):")
for mem in ("pageable", "pinned"):
    f = j / f"kmeans_stream_{mem}.json"
    if not f.exists():
        print(f"  {mem:8} missing")
        continue
    s = json.loads(f.read_text())["stream"]
    print(f"  {mem:8} {json.loads(f.read_text())['median_iteration_ms']:9.1f} ms/iter  copies {s['median_h2d_gbs']:5.1f} GB/s  "
          f"sustained {s['median_stream_gbs']:5.1f} GB/s = {s['percent_of_h2d_ceiling']:5.1f} % of {s['h2d_ceiling_gbs']:.1f} GB/s")
PY
fi
if [[ $skip != *" kmeans_scaling "* ]]; then
  # Several GPUs (docs/multi-gpu.md): small shapes on the GPU counts this machine has (1, 2, 4, 8); the
  # full strong and weak scaling runs are `python3 bench/kmeans_scaling.py` without --quick.
  step kmeans_scaling_quick python3 bench/kmeans_scaling.py --kmeans "$apps/kmeans" --quick --iters 10 \
    --out "$out/json/kmeans_scaling_quick.json"
  grep -E "GPU\(s\)|^strong|^weak" "$out/logs/kmeans_scaling_quick.log" >>"$summary"
fi

if [[ $skip != *" abft "* ]] && [ -x "$apps/abft-encode" ]; then
  for p in float double; do
    step "abft-encode_sweep_$p" "$apps/abft-encode" --precision $p --sizes 1024,2048,4096,8192,10240,16384,20480,25600,30720 \
      --compare --json "$out/json/abft-encode_sweep_$p.json"
    grep -E "^ *(20480|size|backend)" "$out/logs/abft-encode_sweep_$p.log" | head -8 >>"$summary"
  done
  # Flips in random bits of C: under the rounding threshold about half (float) and three quarters (double)
  # change C by more than it (one in seven under the L1 bound), so 8000 trials give thousands of flips
  # that must all be corrected; 1000 clean trials count false alarms and the margin to the rounding.
  for p in float double; do
    step "abft-gemm_campaign_$p" "$apps/abft-gemm" --precision $p --size 2048 --inject 1 --bits all --trials 8000 \
      --clean-trials 1000 --seed 1 --json "$out/json/abft-gemm_campaign_$p.json"
    grep -vE "^  not corrected:" "$out/logs/abft-gemm_campaign_$p.log" | tail -13 >>"$summary"
  done
  step abft-gemm_overhead_8192 "$apps/abft-gemm" --size 8192 --trials 10 --clean-trials 10 --seed 2 \
    --json "$out/json/abft-gemm_overhead_8192.json"
  grep -h "overhead" "$out/logs/abft-gemm_overhead_8192.log" >>"$summary"
fi

if [[ $skip != *" kmeans_vs_flash "* ]]; then
  # skinny.KMeans against flash-kmeans and a PyTorch Lloyd, reduced grid, about 5 minutes (the whole grid:
  # bench/README-kmeans.md). The Python package is installed from this tree unless the installed one has the
  # benchmark's API already; flash-kmeans from the carried wheels (this machine may have no network).
  if ! python3 bench/kmeans_bench.py --check-api >/dev/null 2>&1; then
    step python_install env CUDAARCHS=native CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      python3 -m pip install --no-build-isolation .
  fi
  if compgen -G ".wheels/*.whl" >/dev/null; then
    step wheels_install python3 -m pip install --no-deps --no-index .wheels/*.whl
  else
    echo "kmeans_vs_flash: no .wheels/*.whl here: flash-kmeans only if it is installed already" | tee -a "$summary"
  fi
  step kmeans_vs_flash env PYTHONUNBUFFERED=1 python3 bench/kmeans_bench.py --n 2^18,2^22 --d 16,128,4096 \
    --k 16,1024 --dtypes float32,float16 --time-budget 200 --json "$out/json/kmeans_vs_flash.json"
  step kmeans_vs_flash_large_k env PYTHONUNBUFFERED=1 python3 bench/kmeans_bench.py --n 2^20,2^22 --d 16,128 \
    --k 8192 --dtypes float32,float16 --time-budget 100 --json "$out/json/kmeans_vs_flash_large_k.json"
  grep -h "^summary" "$out"/logs/kmeans_vs_flash*.log >>"$summary"
  if compgen -G "$out/json/kmeans_vs_flash*.json" >/dev/null; then
    step kmeans_vs_flash_plot python3 bench/plot_kmeans.py "$out"/json/kmeans_vs_flash*.json --out "$out/figures"
  fi
fi

# The copy meant for the repository: K-means centroids (k x d values) and labels (n values) replaced
# by a note.
python3 - "$out/json" <<'PY'
import json, pathlib, sys
for f in pathlib.Path(sys.argv[1]).glob("kmeans*.json"):
    d = json.loads(f.read_text())
    for key in ("cluster_centers_", "labels_"):
        if isinstance(d.get(key), list):
            d[key] = "removed from the committed copy (size); rerun to get it"
    f.write_text(json.dumps(d, indent=1))
PY
tar czf "$out/results.tgz" -C "$out" json logs
echo
echo "== run-all on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
cat "$summary"
exit $failed
