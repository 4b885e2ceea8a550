#!/usr/bin/env bash
# Fault-tolerant K-means on the GPU (kmeans --protect): the overhead per iteration, false alarms over 1000
# clean iterations, and fault campaigns, on the main job and on 1048576 x 128, k = 1024:
#   bench/protect_bench.sh OUTDIR [TRIALS]        (a Release build at build/gpu-check; TRIALS default 2000)
# Writes OUTDIR/*.json and logs; prints a table last.
#   PROTECT_PARTS="overhead clean campaign"       parts to run (default: all)
#   PROTECT_BACKENDS="auto cublas tsm2"           backends of the overhead part
#   PROTECT_SHAPES="main many"                    shapes to run (many_fast: 1048576 x 128, k = 1024, --math fast)
set -uo pipefail
out=${1:?usage: bench/protect_bench.sh OUTDIR [TRIALS]}
trials=${2:-2000}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
km=build/gpu-check/apps/kmeans
parts=" ${PROTECT_PARTS:-overhead clean campaign} "
main=(--n 262144 --d 4096 --k 16)
many=(--n 1048576 --d 128 --k 1024)
many_fast=(--n 1048576 --d 128 --k 1024 --math fast)

if [[ $parts == *" overhead "* ]]; then
  # 50 iterations each: unprotected with the default path (auto) and the same backend as the protected run,
  # then protected. Medians per iteration.
  for shape in ${PROTECT_SHAPES:-main many}; do
    declare -n s=$shape
    for backend in ${PROTECT_BACKENDS:-auto cublas tsm2}; do
      "$km" "${s[@]}" --iters 50 --backend $backend --json "$out/overhead_${shape}_${backend}.json" >"$out/overhead_${shape}_${backend}.log" 2>&1
      "$km" "${s[@]}" --iters 50 --backend $backend --protect --json "$out/overhead_${shape}_${backend}_protect.json" \
        >"$out/overhead_${shape}_${backend}_protect.log" 2>&1
    done
  done
fi

if [[ $parts == *" clean "* ]]; then
  # False alarms: 1000 clean protected iterations per shape (synthetic data runs all --iters).
  for shape in ${PROTECT_SHAPES:-main many}; do
    declare -n s=$shape
    "$km" "${s[@]}" --iters 1000 --protect --json "$out/clean_$shape.json" >"$out/clean_$shape.log" 2>&1
  done
fi

if [[ $parts == *" campaign "* ]]; then
  # Each trial is a whole fit of 10 iterations with one fault in a random iteration, from random initial
  # centroids (the same in every trial and in the clean fit; a cheap start for thousands of fits).
  seed=1
  for shape in ${PROTECT_SHAPES:-main many}; do
    declare -n s=$shape
    "$km" "${s[@]}" --iters 10 --init random --protect --campaign "$trials" --inject-seed $seed \
      --json "$out/campaign_$shape.json" >"$out/campaign_$shape.log" 2>&1
    seed=$((seed + 1))
  done
fi

python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    try:
        r = json.load(open(path))
    except (OSError, ValueError):
        continue
    rows[os.path.basename(path)[:-5]] = r
print(f"{'run':34} {'ms/iter':>8} {'dist':>7} {'argmin':>7} {'update':>7} {'path':>18} {'detections':>10} {'max ratio':>9}")
for name, r in rows.items():
    p = r.get("protection", {})
    det = p.get("distance_detections", 0) + p.get("sum_detections", 0) if p.get("enabled") else "-"
    ratio = f"{p['max_clean_ratio']:.3g}" if p.get("enabled") else "-"
    print(f"{name:34} {r['median_iteration_ms']:8.3f} {r['median_distances_ms']:7.3f} {r['median_argmin_ms']:7.3f} "
          f"{r['median_update_ms']:7.3f} {r['backend_resolved'][:18]:>18} {det:>10} {ratio:>9}")
for name, r in rows.items():
    c = r.get("campaign")
    if c:
        print(f"{name}: {c['trials']} trials: corrected {c['corrected']}, detected-but-wrong {c['detected_labels_differ']}, "
              f"missed {c['missed']}, below bound {c['below_bound']} (labels differ {c['below_bound_labels_differ']}), "
              f"false alarms {c['false_alarms']}, max clean ratio {c['max_clean_ratio']:.3g}, "
              f"overhead {c['overhead_percent']:+.1f} %")
EOF
