#!/usr/bin/env bash
# A/B of two kmeans runs on a GPU machine: ms per iteration (and the distances' part) per shape, the two
# sides alternating for a few rounds so that both see the GPU in the same state. A side is a kmeans binary,
# optionally preceded by VAR=VALUE settings (the library's switches: SKINNY_NEAREST_WGMMA=0,
# SKINNY_NEAREST_EXACT=..., SKINNY_KMEANS_SUMS=..., SKINNY_KMEANS_FUSED_MIN_K=..., SKINNY_KMEANS_ONE_PASS=...).
#   scripts/kmeans-ab.sh [--rounds R] [--n N] 'A' 'B' -- 'SHAPE' ['SHAPE' ...]
# Each SHAPE is kmeans arguments besides --n, --init, --iters and --tol (random init, 10 iterations, tol 0):
#   scripts/kmeans-ab.sh /tmp/kmeans_old build/dev/apps/kmeans -- '--d 2 --k 8192 --math fast'
#   scripts/kmeans-ab.sh build/dev/apps/kmeans 'SKINNY_KMEANS_SUMS=sorted build/dev/apps/kmeans' \
#       -- '--d 128 --k 16 --math fast' '--d 128 --k 16 --math fast --precision half'
set -euo pipefail
rounds=2
n=1048576
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    *) echo "kmeans-ab: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $# -lt 4 || $3 != "--" ]]; then
  echo "usage: scripts/kmeans-ab.sh [--rounds R] [--n N] 'A' 'B' -- 'SHAPE' ['SHAPE' ...]" >&2
  exit 2
fi
sides=("$1" "$2")
shift 3

# One run: "ms (distances)" from the program's per-iteration line, "ms (one pass x)" where one kernel
# assigned and summed, or the error's first line.
run() {
  local side=$1 shape=$2 line
  # shellcheck disable=SC2086  # the side and the shape are word lists on purpose
  line=$(env $side --n "$n" --init random --iters 10 --tol 0 $shape 2>&1 | grep -E "ms per iteration|rror" | head -1)
  sed -E -e 's/^([0-9.]+) ms per iteration.*distances ([0-9.]+).*/\1 (\2)/' \
    -e 's/^([0-9.]+) ms per iteration.*assignment and sums ([0-9.]+).*/\1 (one pass \2)/' <<<"$line"
}

header="shape"
for ((r = 1; r <= rounds; ++r)); do header+=" | A | B"; done
echo "A = ${sides[0]}"
echo "B = ${sides[1]}"
echo "$header   (ms per iteration (distances), n = $n)"
for shape in "$@"; do
  row="$shape"
  for ((r = 1; r <= rounds; ++r)); do
    for side in "${sides[@]}"; do row+=" | $(run "$side" "$shape")"; done
  done
  echo "$row"
done
