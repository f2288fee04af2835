#!/bin/sh
# lowp mix at the size of deployed models, in one run on this machine:
#   - writes Llama 3.2 1B's shape (16 layers, tied, 2.47 GB bf16) and Llama
#     3.1 8B's (32 layers, 16.1 GB bf16) with random weights to /tmp
#     (bench/write_checkpoint; kept in $LOWP_SCALE_DIR if set, else deleted
#     on exit), each with 2 x 32 token ids: the first sequence tunes, the
#     second verifies;
#   - runs `lowp mix --bits-per-weight 6 --types q4_0,q8_0 --baselines none`
#     under /usr/bin/time (%M: peak RSS, %e: seconds): every matrix alone in
#     both types measured end to end (1B: 113 matrices, 226 candidates; 8B:
#     226 matrices, 452 candidates), the allocation, and the mix verified;
# and prints one JSON object per line (to OUT if given). Two fast types keep
# the sweep's time in the products, not the k-quants' searches; the
# candidates run in rounds of 64 (api/mix.cc), so memory is the evaluator's
# bound whatever the number of types. Needs 20 GB of disk.
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
  /usr/bin/time -o "$dir/time" -f '%M %e' "$lowp" mix --model "$dir/$shape" --bits-per-weight 6 \
    --types q4_0,q8_0 --baselines none --tune-tokens "$dir/$shape/tune.npy" \
    --tokens "$dir/$shape/verify.npy" --threads 2 --json --quiet >"$dir/mix.json"
  read -r kib seconds <"$dir/time"
  /usr/bin/python3 - "$dir/mix.json" "$shape" "$kib" "$seconds" \
    "$(stat -c %s "$dir/$shape/model.safetensors")" >>"$results" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"tool": "lowp mix", "shape": sys.argv[2], "matrices": len(j["sensitivity"]),
                  "candidates": j["candidates_measured"], "weights": j["weights"],
                  "bits_per_weight": j["bits_per_weight"], "allocation_exact": j["allocation"]["exact"],
                  "predicted_kl": j["predicted"]["kl_mean"], "measured_kl": j["measured"]["kl_mean"],
                  "max_rss_bytes": int(sys.argv[3]) * 1024, "seconds": float(sys.argv[4]),
                  "file_bytes": int(sys.argv[5]), "threads": 2}))
PY
done
cat "$results" >"$out"
