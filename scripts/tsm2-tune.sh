#!/usr/bin/env bash
# TSM2 tuning experiments on a GPU machine, in one call:
#   scripts/tsm2-tune.sh OUTDIR [build]
# builds (unless a build exists and "build" is not given), runs the TSM2 tests, the baseline tsm2-bench,
# then sweeps the planner/kernel overrides (SKINNY_TSM2_*, gemm/include/skinny/gemm/tsm2_tuning.hpp) over the shapes
# that fall short, and profiles the worst ones with ncu. Prints one line per configuration last.
set -uo pipefail
out=${1:?usage: scripts/tsm2-tune.sh OUTDIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=build/gpu-check
if [ ! -x "$build/apps/tsm2-bench" ] || [ "${2:-}" = build ]; then
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native &&
    cmake --build "$build" -j "$(nproc)"; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
bench=$build/apps/tsm2-bench
summary=$out/summary.txt
: >"$summary"

if [ -n "${TUNE_TESTS:-1}" ] && [ "${TUNE_TESTS:-1}" != 0 ]; then
  "$build/tests/gemm/gemm_gpu_tests" --gtest_brief=1 --gtest_filter="${TUNE_TEST_FILTER:-GemmApi.*:Tsm2.*:*/tsm2_f*}" \
    >"$out/tests.log" 2>&1
  echo "tests: exit $? $(grep -E 'PASSED|FAILED' "$out/tests.log" | tr '\n' ' ')" >>"$summary"
fi

# One tsm2-bench run per configuration; keeps the lines of the table (prec A rows inner k | cuBLAS | tsm2).
run() {  # run LABEL ENV... -- ARGS...
  local label=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" "$bench" --no-ablation "$@" >"$out/run_${label}.txt" 2>&1
  grep -E "^(float|double) " "$out/run_${label}.txt" | sed "s/^/${label} | /" >>"$summary"
}

if [ "${TUNE_BASE:-1}" != 0 ]; then
  "$bench" --no-ablation --json "$out/base.json" >"$out/base.txt" 2>&1
  grep -E "ceiling|^(float|double) |geometric" "$out/base.txt" | sed 's/^/base | /' >>"$summary"
fi

for prec in float double; do
  for split in 12 16 24; do
    for t1 in 64 128; do
      run "cm_${prec}_s${split}_t${t1}" SKINNY_TSM2_SPLIT=$split SKINNY_TSM2_T1=$t1 -- \
        --precision $prec --sizes 10240 --ks 8,16 --no-kmeans-shape
    done
  done
  for t2 in 0 8; do  # k = 16 on row-major A in one pass, or two passes of 8 (the second from L2)
    run "rm_${prec}_maxt2_${t2}" SKINNY_TSM2_MAX_T2=$t2 -- --precision $prec --no-grid
  done
done

if command -v ncu >/dev/null && [ "${TUNE_NCU:-1}" != 0 ]; then
  sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats"
  # shellcheck disable=SC2086
  ncu --kernel-name regex:'tsm2_(cm|rm)_kernel' --launch-skip 6 --launch-count 1 $sections \
    "$bench" --no-ablation --precision float --sizes 10240 --ks 16 --no-kmeans-shape >"$out/ncu_cm_f32_10240_16.txt" 2>&1
  # shellcheck disable=SC2086
  ncu --kernel-name regex:'tsm2_rm_kernel' --launch-skip 6 --launch-count 1 $sections \
    "$bench" --no-ablation --precision float --no-grid >"$out/ncu_rm_f32_kmeans.txt" 2>&1
  for f in "$out"/ncu_*.txt; do
    echo "== $(basename "$f")" >>"$summary"
    grep -E "DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Duration|Block Limit|Eligible Warps|Issued Warp|No Eligible" "$f" | head -16 >>"$summary"
  done
fi
cat "$summary"
