#!/usr/bin/env bash
# The rounding threshold of issue 22 (docs/abft-threshold.md) on a GPU, in one command, after a Release
# build at build/gpu-check (SKINNY_BUILD=dir for another):
#   scripts/abft-threshold-check.sh OUTDIR
# abft-gemm fault campaigns, one random bit flip of C per trial and 1000 clean GEMMs each, in float and
# double: the rounding model at n = 2048 (2000 flips, each on its own product) and 8192 (2000 flips, 10
# per product: the GEMMs dominate), and the L1 bound at 2048 for comparison; then the same through
# multiply_and_verify (--fused: one pass over C, the flips striking between the product and it; at 8192
# 500 flips and 300 clean products, one product per trial). Logs and JSON go to OUTDIR; a short table
# comes last, with the cost of protection both ways. The ABFT GPU tests run first. About 5 minutes.
set -uo pipefail
out=${1:?usage: scripts/abft-threshold-check.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
build=${SKINNY_BUILD:-build/gpu-check}
app=$build/apps/abft-gemm
[ -x "$app" ] || { echo "no $app: build first (SKINNY_STEPS=build scripts/gpu-check.sh OUTDIR)"; exit 1; }

# The ABFT GPU tests first: the thresholds the GPU computes against the host model, both models clean.
# (Through ctest in a build tree; a folder of binaries built elsewhere runs the test program itself.)
if [ -f "$build/CTestTestfile.cmake" ]; then
  ctest --test-dir "$build" -L gpu -R abft --output-on-failure >"$out/ctest_abft_gpu.log" 2>&1
else
  "$build/tests/abft/abft_gpu_tests" --gtest_brief=1 >"$out/ctest_abft_gpu.log" 2>&1
fi
grep -E "tests passed|tests failed|PASSED|FAILED|\*\*\*Failed|Failure|Expected|Which is" "$out/ctest_abft_gpu.log" | head -20

run() {  # name, then abft-gemm's arguments (TRIALS and CLEAN: the trial counts, 2000 and 1000 unless set)
  local name=$1
  shift
  "$app" --bits all --trials "${TRIALS:-2000}" --clean-trials "${CLEAN:-1000}" --seed 1 "$@" --json "$out/$name.json" \
    >"$out/$name.log" 2>&1 || { echo "$name failed:"; tail -5 "$out/$name.log"; }
}
for p in float double; do
  run "rounding_${p}_2048" --precision "$p" --size 2048
  run "rounding_${p}_8192" --precision "$p" --size 8192 --flips-per-product 10
done
for p in float double; do run "l1_${p}_2048" --precision "$p" --size 2048 --threshold-model l1; done
for p in float double; do
  run "fused_${p}_2048" --precision "$p" --size 2048 --fused
  TRIALS=500 CLEAN=300 run "fused_${p}_8192" --precision "$p" --size 8192 --fused
done

if ! command -v python3 >/dev/null; then
  grep -H -E "threshold:|above|detected|corrected|missed|false alarms|detection bound|overhead" "$out"/*.log
  exit 0
fi
python3 - "$out" <<'EOF'
import glob, json, os, sys
print(f"{'run':<20} {'flips':>5} {'above':>5} {'det':>5} {'corr':>5} {'miss':>4} {'uncorr':>6} "
      f"{'false alarms':>12} {'clean/tau':>9} {'bound/clean':>11} {'cost: 2 passes':>14} {'1 pass':>7}")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    with open(path) as f:
        d = json.load(f)
    name = os.path.basename(path)[:-5]
    print(f"{name:<20} {d['injected']:>5} {d['above_threshold']:>5} {d['detected']:>5} {d['corrected']:>5} "
          f"{d['missed']:>4} {d['detected_not_corrected']:>6} {d['false_alarms']:>5} of {d['clean_trials']:<4} "
          f"{d['clean_max_ratio_to_threshold']:>9.3g} {d['detection_bound_over_largest_clean_difference']:>11.3g} "
          f"{d['overhead_percent']:>13.1f}% {d['fused_overhead_percent']:>6.1f}%")
EOF
