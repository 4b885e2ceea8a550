#!/usr/bin/env bash
# The whole GPU check in one command, on a machine with an NVIDIA GPU:
#   scripts/gpu-check.sh OUTDIR
# configures a Release build for the local GPU, builds with every core, runs every test, runs
# compute-sanitizer memcheck on the GPU tests, runs the benchmarks, writes logs and JSON to OUTDIR
# and prints a short table last. Environment knobs (for quick iterations):
#   SKINNY_STEPS="build test python bench memcheck racecheck"   steps to run (default: all)
#   RUN_ALL_SKIP="ladder tsm2 kmeans abft"      benchmark parts to skip (bench/run-all.sh)
#   SKINNY_MEMCHECK_FILTER                      gtest filter for memcheck of gemm_gpu_tests; by default all but
#                                               the paper's TSM2 V0/V1 (global-memory only, minutes under memcheck);
#                                               the kmeans and abft GPU tests run under memcheck too, without
#                                               their largest cases
#   SKINNY_RACECHECK_FILTER                     gtest filter for racecheck; by default the TSM2 kernels
#                                               (shared memory and cp.async) on small shapes (the nearest,
#                                               ABFT and K-means kernels always run under racecheck)
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
steps=${SKINNY_STEPS:-"build test python bench memcheck racecheck"}
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
  ctest --test-dir "$build" --output-on-failure -j 3 >"$out/ctest.log" 2>&1
  status[test]=$?
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed" "$out/ctest.log" | tail -15
fi

if has python; then
  # The Python package into the current Python (pip install . for this GPU), its pytest suite, the main job.
  { CUDAARCHS=native CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python3 -m pip install --no-build-isolation -v . &&
    python3 -m pytest tests/python -q -rs &&
    python3 python/examples/main_job.py; } >"$out/python.log" 2>&1
  status[python]=$?
  grep -E "passed|failed|error|ms per iteration|Error" "$out/python.log" | tail -12
fi

if has bench; then
  bench/run-all.sh "$out/bench" >"$out/bench.txt" 2>&1
  status[bench]=$?
  sed -n '/^== run-all/,$p' "$out/bench.txt"
fi

if has memcheck; then
  echo "== memcheck" >"$out/sanitizer.log"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
    --gtest_filter="${SKINNY_MEMCHECK_FILTER:-*-*/tsm2_v0_*:*/tsm2_v1_*}" >>"$out/sanitizer.log" 2>&1
  status[memcheck]=$?
  # The kernels the trial would pick per shape, each alone: row-major A on the tensor cores and row at a
  # time, column-major float A on the tensor cores, DMMA at 512 threads per block; and the splits of lean waves.
  for forced in SKINNY_TSM2_RM_KERNEL=mma SKINNY_TSM2_RM_KERNEL=stream SKINNY_TSM2_CM_KERNEL=dmma SKINNY_TSM2_CM_KERNEL=tf32 \
                "SKINNY_TSM2_CM_KERNEL=dmma SKINNY_TSM2_T1=512" SKINNY_TSM2_SPLIT_RULE=lean; do
    # shellcheck disable=SC2086  # an entry may set two variables
    env $forced compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 --gtest_filter='*/tsm2_f*:Tsm2.*' >>"$out/sanitizer.log" 2>&1 ||
      status[memcheck]=$?
  done
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/kmeans/kmeans_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*-*SixtyFourBit*:*RecoversBlobs*' >>"$out/sanitizer.log" 2>&1 || status[memcheck]=$?
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/kmeans/kmeans_init_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*SameSeed*:*KEqualsN*:*Misaligned*' >>"$out/sanitizer.log" 2>&1 || status[memcheck]=$?
  # Protected K-means (checked argmin, checksum row, sums' column totals) and nearest's row sums.
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/kmeans/kmeans_protect_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*SixteenBit*:*Weighted*:*InjectionNeeds*' >>"$out/sanitizer.log" 2>&1 || status[memcheck]=$?
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='Nearest.RowSums*' >>"$out/sanitizer.log" 2>&1 || status[memcheck]=$?
  # The one-pass kernel (cp.async ring, distributed shared memory across a cluster, register sums).
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/kmeans/kmeans_one_pass_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*MatchesExact*' >>"$out/sanitizer.log" 2>&1 || status[memcheck]=$?
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/abft/abft_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*-*Campaign*' >>"$out/sanitizer.log" 2>&1 || status[memcheck]=$?
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer.log" | tail -12
fi

if has racecheck; then
  echo "== racecheck" >>"$out/sanitizer.log"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
    --gtest_filter="${SKINNY_RACECHECK_FILTER:-*tsm2*m7n3k1_*:*tsm2*m1n1k1_*:*tsm2*m1000n64k7_*}" >>"$out/sanitizer.log" 2>&1
  status[racecheck]=$?
  for forced in SKINNY_TSM2_RM_KERNEL=mma SKINNY_TSM2_RM_KERNEL=stream SKINNY_TSM2_CM_KERNEL=dmma SKINNY_TSM2_CM_KERNEL=tf32 \
                "SKINNY_TSM2_CM_KERNEL=dmma SKINNY_TSM2_T1=512"; do
    # shellcheck disable=SC2086  # an entry may set two variables
    env $forced compute-sanitizer --tool racecheck --error-exitcode 9 \
      "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
      --gtest_filter="${SKINNY_RACECHECK_FILTER:-*tsm2*m7n3k1_*:*tsm2*m1n1k1_*:*tsm2*m1000n64k7_*}:*tsm2_f*m1000n16k1000_*:*tsm2_f*m7n17k10243_*" \
      >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  done
  # The fused nearest-centre kernel (cp.async ring, shared-memory minima).
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='Nearest.RepeatedRuns*' >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  # The fused ABFT encoder and the protected GEMM's two-way sums (shared-memory tiles), the K-means argmin
  # and counts, the streamed update.
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/abft/abft_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*EveryEncoder*:*ThresholdsMatch*:*TwoErrors*:*MultiplyAndVerify*' >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/kmeans/kmeans_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*MatchesTheCpuReference*:*EmptyCluster*:*ManyClusters*' >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/kmeans/kmeans_protect_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*SixteenBit*:*Weighted*:*InjectionNeeds*' >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/kmeans/kmeans_one_pass_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*MatchesExact*' >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  # k-means||'s reduction (shared-memory block sums, warp scans).
  compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/kmeans/kmeans_init_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*SameSeed*:*KEqualsN*' >>"$out/sanitizer.log" 2>&1 || status[racecheck]=$?
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer.log" | tail -12
fi

echo
echo "== gpu-check on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
printf '%-10s %s\n' step result
failed=0
for s in build test python bench memcheck racecheck; do
  [ -n "${status[$s]+x}" ] || continue
  if [ "${status[$s]}" -eq 0 ]; then r=ok; else r="FAILED (exit ${status[$s]})"; failed=1; fi
  printf '%-10s %s\n' "$s" "$r"
done
exit $failed
