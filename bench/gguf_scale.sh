#!/bin/sh
# Writing a GGUF file at the size of a deployed model (issue 39's goal: peak
# RSS within 1 GB beyond one layer, time within 1.2x of quantizing alone):
# writes Llama 3.1 8B's shape with random weights (bench/write_checkpoint:
# 32 layers, 16.1 GB bf16; LAYERS=N for fewer) to /tmp (kept in
# $LOWP_SCALE_DIR if set, else deleted on exit), then runs under
# /usr/bin/time (%M: peak RSS, %e: seconds)
#   lowp quant-error --model M --scheme SCHEME --summary      (quantizing alone)
#   lowp quantize --model M --weights SCHEME --out Q.gguf     (the file llama.cpp runs)
# SCHEME Q4_K_M unless given; the vocabulary is Llama 2's tokenizer.model
# padded to the shape's 128,256 tokens (the weights are random anyway).
# FORMAT=compressed-tensors or FORMAT=gptq writes that model directory
# instead of the GGUF file (SCHEME then one it holds, e.g. int4-g128).
# Prints one JSON object per run (to OUT if given). Needs about 22 GB of disk.
#
# usage: bench/gguf_scale.sh BUILD_DIR [OUT.jsonl] [SCHEME]
set -eu
build=${1:?usage: bench/gguf_scale.sh BUILD_DIR [OUT.jsonl] [SCHEME]}
out=${2:-/dev/stdout}
scheme=${3:-Q4_K_M}
layers=${LAYERS:-32}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
lowp="$build/cli/lowp"
dir=${LOWP_SCALE_DIR:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d /tmp/lowp-gguf-scale.XXXXXX)
  trap 'rm -rf "$dir"' EXIT INT TERM
fi
model="$dir/8b-$layers"
[ -f "$model/model.safetensors" ] ||
  "$build/bench/write_checkpoint" --shape llama-3.1-8b --layers "$layers" --out "$model"

# run CASE COMMAND...: one lowp command under /usr/bin/time.
run() {
  name=$1
  shift
  /usr/bin/time -o "$dir/time" -f '%M %e %U' "$lowp" "$@" >/dev/null
  read -r kib seconds user <"$dir/time"
  bytes=0
  [ -f "$dir/out.gguf" ] && bytes=$(stat -c %s "$dir/out.gguf")
  [ -d "$dir/out" ] && bytes=$(stat -c %s "$dir/out/model.safetensors")
  rm -rf "$dir/out.gguf" "$dir/out"
  printf '{"case": "%s", "scheme": "%s", "layers": %s, "max_rss_bytes": %s, "seconds": %s, "user_seconds": %s, "model_bytes": %s, "output_bytes": %s}\n' \
    "$name" "$scheme" "$layers" "$((kib * 1024))" "$seconds" "$user" \
    "$(stat -c %s "$model/model.safetensors")" "$bytes" >>"$out"
}

run quantize-alone quant-error --model "$model" --scheme "$scheme" --summary --quiet
format=${FORMAT:-gguf}
if [ "$format" = gguf ]; then
  run gguf quantize --model "$model" --weights "$scheme" --out "$dir/out.gguf" \
    --tokenizer "$here/tests/data/llama2-tokenizer/tokenizer.model" --summary --quiet
else
  run "$format" quantize --model "$model" --weights "$scheme" --format "$format" \
    --out "$dir/out" --summary --quiet
fi
