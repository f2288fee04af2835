#!/bin/sh
# GPTQ at the size of a deployed model, on this machine: writes Llama 3.1
# 8B's shape with random weights (bench/write_checkpoint: 32 layers, 16.1 GB
# bf16; LAYERS=N for fewer) and 4,096 calibration tokens (2 x 2048) to /tmp
# (kept in $LOWP_SCALE_DIR if set, else deleted on exit), then runs under
# /usr/bin/time (%M: peak RSS, %e: seconds)
#   lowp quantize --model M --weights SCHEME:gptq --calib-tokens T --out Q
# and the same without :gptq (rounding to nearest), SCHEME int4-g128 unless
# given, and prints one JSON object per run (to OUT if given). Needs about
# 35 GB of disk (the model and one output at a time) and 6 GB of memory.
#
# usage: bench/gptq_scale.sh BUILD_DIR [OUT.jsonl] [SCHEME]
set -eu
build=${1:?usage: bench/gptq_scale.sh BUILD_DIR [OUT.jsonl] [SCHEME]}
out=${2:-/dev/stdout}
scheme=${3:-int4-g128}
layers=${LAYERS:-32}
build=$(cd "$build" && pwd)
lowp="$build/cli/lowp"
dir=${LOWP_SCALE_DIR:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d /tmp/lowp-gptq-scale.XXXXXX)
  trap 'rm -rf "$dir"' EXIT INT TERM
fi
model="$dir/8b-$layers"
[ -f "$model/model.safetensors" ] ||
  "$build/bench/write_checkpoint" --shape llama-3.1-8b --layers "$layers" --out "$model" \
    --tokens 2:2048

# run NAME WEIGHTS: one `lowp quantize --model` under /usr/bin/time.
run() {
  name=$1 weights=$2
  /usr/bin/time -o "$dir/time" -f '%M %e %U' "$lowp" quantize --model "$model" \
    --weights "$weights" --calib-tokens "$model/tokens.npy" --out "$dir/out.safetensors" \
    --dtype BF16 --summary --quiet >/dev/null
  read -r kib seconds user <"$dir/time"
  rm -f "$dir/out.safetensors"
  printf '{"tool": "lowp quantize --model", "case": "%s", "weights": "%s", "layers": %s, "calibration_tokens": 4096, "max_rss_bytes": %s, "seconds": %s, "user_seconds": %s, "file_bytes": %s}\n' \
    "$name" "$weights" "$layers" "$((kib * 1024))" "$seconds" "$user" \
    "$(stat -c %s "$model/model.safetensors")" >>"$out"
}

run gptq "$scheme:gptq"
run nearest "$scheme"
