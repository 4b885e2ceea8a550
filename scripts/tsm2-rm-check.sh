#!/usr/bin/env bash
# Row-major TSM2 on a GPU machine, in one call: the trial's choice and each kernel alone (tensor cores,
# FFMA, row-at-a-time: SKINNY_TSM2_RM_KERNEL=mma|ffma|stream) against cuBLAS, and what they change end to
# end.
#   scripts/tsm2-rm-check.sh OUTDIR
# Builds build/gpu-check if needed, runs the TSM2 GPU tests, tsm2-bench on row-major A (the paper's
# grid in row layout and the K-means shape) with each kernel, the K-means main job, and abft-encode at
# n = 20480 in both precisions. Prints one summary last; logs stay in OUTDIR.
set -uo pipefail
out=${1:?usage: scripts/tsm2-rm-check.sh OUTDIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=build/gpu-check
if [ ! -x "$build/apps/tsm2-bench" ]; then
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native &&
    cmake --build "$build" -j "$(nproc)"; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
apps=$build/apps
summary=$out/summary.txt
: >"$summary"

ctest --test-dir "$build" -L gpu -R "gemm_gpu" >"$out/tests.log" 2>&1
echo "gemm tests: exit $? $(grep -E 'tests passed|tests failed' "$out/tests.log")" >>"$summary"
for lib in kmeans abft; do
  "$build/tests/$lib/${lib}_gpu_tests" --gtest_brief=1 >"$out/tests_$lib.log" 2>&1
  echo "$lib tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/tests_$lib.log" | tr '\n' ' ')" >>"$summary"
done

for kernel in trial mma ffma stream; do
  case $kernel in
    trial) envs=(); layouts=col,row ;;
    *) envs=(SKINNY_TSM2_RM_KERNEL=$kernel); layouts=row ;;  # stream forced: k > 8 runs the FFMA kernel
  esac
  env SKINNY_TSM2_VERBOSE=1 "${envs[@]}" "$apps/tsm2-bench" --no-ablation --grid-layouts $layouts --json "$out/tsm2_rm_$kernel.json" \
    >"$out/tsm2_rm_$kernel.log" 2>&1
  grep -E "ceiling|^(float|double) +(row|col)|geometric" "$out/tsm2_rm_$kernel.log" | sed "s/^/$kernel | /" >>"$summary"
done

for prec in float double; do
  "$apps/kmeans" --n 262144 --k 16 --backend tsm2 --precision $prec --iters 30 --tol 0 \
    --json "$out/kmeans_$prec.json" >"$out/kmeans_$prec.log" 2>&1
  echo "kmeans $prec tsm2: exit $? $(tail -2 "$out/kmeans_$prec.log" | tr '\n' ' ')" >>"$summary"
  "$apps/abft-encode" --size 20480 --precision $prec --compare --json "$out/abft_$prec.json" \
    >"$out/abft_$prec.log" 2>&1
  echo "abft-encode $prec: exit $?" >>"$summary"
  grep -E "^ *(size|20480)" "$out/abft_$prec.log" >>"$summary"
done
cat "$summary"
