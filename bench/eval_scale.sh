#!/bin/sh
# lowp eval at the size of deployed models, in one run on this machine:
#   - writes Llama 3.2 1B's shape (16 layers, 1.24 B parameters, 2.47 GB bf16,
#     tied) and Llama 3.1 8B's (32 layers, 16.1 GB bf16) with random weights
#     to /tmp (bench/write_checkpoint; kept in $LOWP_SCALE_DIR if set, else
#     deleted on exit), each with token ids (1B: 2 x 128, 8B: 1 x 128);
#   - runs `lowp eval` under /usr/bin/time (%M: peak RSS, %e: seconds):
#       1B, --weights int8-channel,q4_0, 2 x 128 tokens, 2 threads and 1
#       1B, --weights none (the reference and one float32 stream), 2 threads and 1
#       1B, --sample 2:32 --weights q4_0 (decoding together, a read per step)
#       8B, --weights int8-channel,q4_0,nf4,fp8_e4m3fn, 1 x 128 tokens, 2 threads
#   - the same 1B forward in PyTorch (bench/torch_forward.py --checkpoint:
#     Debian's python3-torch, all tokens one batch, the model in memory,
#     loading not timed), at 2 threads and 1, with OpenBLAS's own kernels
#     and with OPENBLAS_CORETYPE set to the kernels lowp chose;
# and prints one JSON object per line (to OUT if given). Needs 24 GB of disk
# and about 8 GB of memory (PyTorch holds the 1B model in float32).
#
# usage: bench/eval_scale.sh BUILD_DIR [OUT.jsonl]
set -eu
build=${1:?usage: bench/eval_scale.sh BUILD_DIR [OUT.jsonl]}
out=${2:-/dev/stdout}
build=$(cd "$build" && pwd)
lowp="$build/cli/lowp"
source=$(cd "$(dirname "$0")/.." && pwd)
dir=${LOWP_SCALE_DIR:-}
if [ -z "$dir" ]; then
  dir=$(mktemp -d /tmp/lowp-eval-scale.XXXXXX)
  trap 'rm -rf "$dir"' EXIT INT TERM
fi
results="$dir/results.jsonl"
: >"$results"

[ -f "$dir/1b/model.safetensors" ] ||
  "$build/bench/write_checkpoint" --shape llama-3.2-1b --out "$dir/1b" --tokens 2:128
[ -f "$dir/8b/model.safetensors" ] ||
  "$build/bench/write_checkpoint" --shape llama-3.1-8b --out "$dir/8b" --tokens 1:128

# run NAME MODEL THREADS ARGS...: one `lowp eval` under /usr/bin/time.
run() {
  name=$1 model=$2 threads=$3
  shift 3
  /usr/bin/time -o "$dir/time" -f '%M %e' "$lowp" eval --model "$dir/$model" --threads "$threads" \
    --json "$@" >"$dir/eval.json"
  read -r kib seconds <"$dir/time"
  core=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["blas"]["core"])' "$dir/eval.json")
  printf '{"tool": "lowp eval", "case": "%s", "model": "%s", "threads": %s, "args": "%s", "max_rss_bytes": %s, "seconds": %s, "file_bytes": %s, "openblas_core": "%s"}\n' \
    "$name" "$model" "$threads" "$*" "$((kib * 1024))" "$seconds" \
    "$(stat -c %s "$dir/$model/model.safetensors")" "$core" >>"$results"
}

for t in 2 1; do
  run 1b-two-candidates 1b "$t" --tokens "$dir/1b/tokens.npy" --weights int8-channel,q4_0
  run 1b-reference 1b "$t" --tokens "$dir/1b/tokens.npy" --weights none
done
run 1b-sample 1b 2 --sample 2:32 --weights q4_0
run 8b-four-candidates 8b 2 --tokens "$dir/8b/tokens.npy" --weights int8-channel,q4_0,nf4,fp8_e4m3fn

# PyTorch's forward of the same 1B tokens: OpenBLAS's own choice, then lowp's.
best=$(sed -n 's/.*"openblas_core": "\([A-Za-z]*\)".*/\1/p' "$results" | head -1)
for t in 2 1; do
  /usr/bin/python3 "$source/bench/torch_forward.py" --checkpoint "$dir/1b" \
    --tokens "$dir/1b/tokens.npy" --threads "$t" --repetitions 3 >>"$results"
  OPENBLAS_CORETYPE=$best /usr/bin/python3 "$source/bench/torch_forward.py" --checkpoint "$dir/1b" \
    --tokens "$dir/1b/tokens.npy" --threads "$t" --repetitions 3 >>"$results"
done
cat "$results" >"$out"
