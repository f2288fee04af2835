#!/bin/sh
# lowp mix at the size of deployed models, in one run on this machine:
#   - writes Llama 3.2 1B's shape (16 layers, tied, 2.47 GB bf16) and Llama
#     3.1 8B's (32 layers, 16.1 GB bf16) with random weights to /tmp
#     (bench/write_checkpoint; kept in $LOWP_SCALE_DIR if set, else deleted
#     on exit), each with 2 x 32 token ids: the first sequence tunes, the
#     second verifies;
#   - runs `lowp mix --bits-per-weight 6 --baselines none` under
#     /usr/bin/time (%M: peak RSS, %e: seconds) with TYPES (default lowp's
#     eight: q2_K q3_K q4_K q5_K q6_K q8_0 iq4_xs fp16) and SENSITIVITY
#     (predicted, the default: one probe per matrix and every type's weight
#     error; exact: every matrix alone in every type measured end to end,
#     1B: 113 matrices, 8B: 226), the allocation, and the mix verified;
#   - with SHARDS=N also the sweep as N shards run side by side (one thread
#     each) and merged with --tables, checked equal to the one run's JSON;
# and prints one JSON object per line (to OUT if given). The candidates run
# in rounds of 64 (api/mix.cc), so memory is the evaluator's bound whatever
# the number of types. Needs 20 GB of disk. (Issue 27's rows: TYPES=q4_0,q8_0
# SENSITIVITY=exact.)
#
# usage: bench/mix_scale.sh BUILD_DIR [OUT.jsonl] [1b|8b ...]
set -eu
build=${1:?usage: bench/mix_scale.sh BUILD_DIR [OUT.jsonl] [1b|8b ...]}
out=${2:-/dev/stdout}
shift 2 2>/dev/null || shift $#
shapes=${*:-1b 8b}
build=$(cd "$build" && pwd)
lowp="$build/cli/lowp"
dir=${LOWP_SCALE_DIR:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d /tmp/lowp-mix-scale.XXXXXX)
  trap 'rm -rf "$dir"' EXIT INT TERM
fi
mkdir -p "$dir"
results="$dir/mix-results.jsonl"
: >"$results"

for shape in $shapes; do
  case $shape in
    1b) name=llama-3.2-1b ;;
    8b) name=llama-3.1-8b ;;
    *) echo "mix_scale.sh: unknown shape $shape (1b, 8b)" >&2; exit 2 ;;
  esac
  [ -f "$dir/$shape/model.safetensors" ] ||
    "$build/bench/write_checkpoint" --shape "$name" --out "$dir/$shape" --tokens 2:32
  /usr/bin/python3 - "$dir/$shape" <<'PY'
import sys, numpy as np
d = sys.argv[1]
t = np.load(d + "/tokens.npy")
np.save(d + "/tune.npy", t[:1])
np.save(d + "/verify.npy", t[1:2])
PY
  set -- --model "$dir/$shape" --bits-per-weight 6 --baselines none \
    --sensitivity "${SENSITIVITY:-predicted}" --tune-tokens "$dir/$shape/tune.npy" \
    --tokens "$dir/$shape/verify.npy" --json --quiet
  [ -n "${TYPES:-}" ] && set -- "$@" --types "$TYPES"
  /usr/bin/time -o "$dir/time" -f '%M %e' "$lowp" mix "$@" --threads 2 >"$dir/mix.json"
  read -r kib seconds <"$dir/time"
  shards=${SHARDS:-0}
  shard_seconds=null
  merged_equal=null
  if [ "$shards" -gt 0 ]; then
    start=$(date +%s.%N)
    i=1
    while [ "$i" -le "$shards" ]; do
      "$lowp" mix "$@" --threads 1 --shard "$i/$shards" --table-out "$dir/shard$i.json" \
        >/dev/null &
      i=$((i + 1))
    done
    wait
    tables=$(seq -f "$dir/shard%g.json" -s , 1 "$shards")
    "$lowp" mix "$@" --threads 2 --tables "$tables" >"$dir/merged.json"
    shard_seconds=$(awk "BEGIN { print $(date +%s.%N) - $start }")
    merged_equal=$(cmp -s "$dir/mix.json" "$dir/merged.json" && echo true || echo false)
  fi
  /usr/bin/python3 - "$dir/mix.json" "$shape" "$kib" "$seconds" \
    "$(stat -c %s "$dir/$shape/model.safetensors")" "$shards" "$shard_seconds" \
    "$merged_equal" >>"$results" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"tool": "lowp mix", "shape": sys.argv[2], "matrices": len(j["sensitivity"]),
                  "types": j["types"], "sensitivity": j["sensitivity_method"],
                  "candidates": j["candidates_measured"], "weights": j["weights"],
                  "bits_per_weight": j["bits_per_weight"], "allocation_exact": j["allocation"]["exact"],
                  "predicted_kl": j["predicted"]["kl_mean"], "measured_kl": j["measured"]["kl_mean"],
                  "max_rss_bytes": int(sys.argv[3]) * 1024, "seconds": float(sys.argv[4]),
                  "file_bytes": int(sys.argv[5]), "threads": 2,
                  "shards": int(sys.argv[6]), "shards_and_merge_seconds": json.loads(sys.argv[7]),
                  "merged_equal": json.loads(sys.argv[8])}))
PY
done
cat "$results" >"$out"
