#!/usr/bin/env bash
# The whole GPU check in one command, on a machine with an NVIDIA GPU:
#   scripts/gpu-check.sh OUTDIR
# configures a Release build for the local GPU, builds with every core, runs every test, runs
# compute-sanitizer memcheck on the GPU tests, runs the benchmarks, writes logs and JSON to OUTDIR
# and prints a short table last. Environment knobs (for quick iterations):
#   SKINNY_STEPS="build test bench memcheck racecheck"   steps to run (default: all)
#   SKINNY_BENCH_SIZES="1024,2048,4096,8192"   gemm-bench sizes
#   SKINNY_TSM2_ARGS=""                         extra tsm2-bench arguments (e.g. --no-ablation)
#   SKINNY_MEMCHECK_FILTER                      gtest filter for memcheck; by default all but the paper's
#                                               TSM2 V0/V1 (global-memory only, and minutes under memcheck)
#   SKINNY_RACECHECK_FILTER                     gtest filter for racecheck; by default the TSM2 kernels
#                                               (shared memory and cp.async) on small shapes
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
steps=${SKINNY_STEPS:-"build test bench memcheck racecheck"}
sizes=${SKINNY_BENCH_SIZES:-1024,2048,4096,8192}
build=build/gpu-check
declare -A status

has() { [[ " $steps " == *" $1 "* ]]; }

if has build; then
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native &&
    cmake --build "$build" -j "$(nproc)"; } >"$out/build.log" 2>&1
  status[build]=$?
  [ "${status[build]}" -eq 0 ] || { tail -40 "$out/build.log"; echo "build failed"; exit 1; }
fi

if has test; then
  ctest --test-dir "$build" --output-on-failure >"$out/ctest.log" 2>&1
  status[test]=$?
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed" "$out/ctest.log" | tail -15
fi

if has bench; then
  bench=0
  : >"$out/bench.txt"
  for precision in float half double; do
    "$build/apps/gemm-bench" --precision "$precision" --sizes "$sizes" --json "$out/gemm_$precision.json" \
      >>"$out/bench.txt" 2>&1 || bench=1
  done
  # shellcheck disable=SC2086
  "$build/apps/tsm2-bench" --json "$out/tsm2.json" ${SKINNY_TSM2_ARGS:-} >>"$out/bench.txt" 2>&1 || bench=1
  status[bench]=$bench
  cat "$out/bench.txt"
fi

if has memcheck; then
  echo "== memcheck" >"$out/sanitizer.log"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
    --gtest_filter="${SKINNY_MEMCHECK_FILTER:-*-*/tsm2_v0_*:*/tsm2_v1_*}" >>"$out/sanitizer.log" 2>&1
  status[memcheck]=$?
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer.log" | tail -3
fi

if has racecheck; then
  echo "== racecheck" >>"$out/sanitizer.log"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
    --gtest_filter="${SKINNY_RACECHECK_FILTER:-*tsm2*m7n3k1_*:*tsm2*m1n1k1_*:*tsm2*m1000n64k7_*}" >>"$out/sanitizer.log" 2>&1
  status[racecheck]=$?
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer.log" | tail -3
fi

echo
echo "== gpu-check on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
printf '%-10s %s\n' step result
failed=0
for s in build test bench memcheck racecheck; do
  [ -n "${status[$s]+x}" ] || continue
  if [ "${status[$s]}" -eq 0 ]; then r=ok; else r="FAILED (exit ${status[$s]})"; failed=1; fi
  printf '%-10s %s\n' "$s" "$r"
done
exit $failed
