#!/usr/bin/env bash
# Issue 43's speed goals in one run, each figure beside its peer measured in
# the same run:
#   - llama.cpp's quantizers (q3_K above all) against ggml's reference, per
#     thread: GGMLBENCH, a harness built outside the repository against
#     ggml's ggml_quantize_chunk and this build's EncodeGgml (it prints
#     "type imp ggml_ms lowp_fast_ms lowp_scal_ms fast/ggml ggml/fast bytes");
#   - quant-error's q4_0 against int8-channel (quant_bench, 4096 x 4096, one
#     thread), and the C++ seven-format sweep;
#   - the seven-format sweep in Python against NumPy's astype(float16)
#     (bench/issue29_numpy.py);
#   - a linear layer's product on bf16 weights widened whole, widened per
#     tile, and on float32 (forward_bench's bf16-product/, one thread);
#   - the float32 forward over Llama 3.2 1B's shape read from its bf16
#     checkpoint (`lowp eval --weights none`: the reference and one float32
#     stream, so a forward is half its time) against PyTorch's forward of the
#     same tokens with the model already in memory (bench/torch_forward.py
#     --checkpoint, loading not timed), at 1 and 2 threads, both on the
#     OpenBLAS kernels lowp picks for this CPU.
#
#   bench/issue43_speed.sh BUILD OUT [GGMLBENCH]
#
# Writes the raw outputs to OUT (created) and the 1B checkpoint (2.5 GB) to
# $LOWP_SCALE_DIR (kept) or a temporary directory (deleted). Needs a quiet
# machine, ~9 GB of memory (PyTorch holds the model in float32) and ~12 min.
set -euo pipefail
build=$(realpath "${1:?usage: bench/issue43_speed.sh BUILD OUT [GGMLBENCH]}")
out=${2:?usage: bench/issue43_speed.sh BUILD OUT [GGMLBENCH]}
ggmlbench=${3:-}
mkdir -p "$out"
out=$(realpath "$out")
here=$(cd "$(dirname "$0")/.." && pwd)
lowp=$build/cli/lowp
dir=${LOWP_SCALE_DIR:-}
if [[ -z $dir ]]; then
  dir=$(mktemp -d /tmp/lowp-issue43.XXXXXX)
  trap 'rm -rf "$dir"' EXIT INT TERM
fi

echo "== machine" | tee "$out/machine.txt"
{ lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'; uname -r; date -u; git -C "$here" rev-parse HEAD; } |
  tee -a "$out/machine.txt"

[[ -f $dir/1b/model.safetensors ]] ||
  "$build/bench/write_checkpoint" --shape llama-3.2-1b --out "$dir/1b" --tokens 2:128 > /dev/null
# The kernels lowp picks for this CPU, for lowp and PyTorch alike.
core=$(env -u OPENBLAS_CORETYPE "$lowp" eval --model "$here/tests/data/stories260K-hf" \
  --sample 1:16 --weights none --json --quiet |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["blas"]["core"])')
export OPENBLAS_CORETYPE=$core
echo "OPENBLAS_CORETYPE=$core" | tee -a "$out/machine.txt"

if [[ -n $ggmlbench ]]; then
  echo "== ggml's quantizers beside lowp's, one thread, best of 9 thread CPU times"
  "$ggmlbench" 9 | tee "$out/ggml.txt"
fi

echo "== quant_bench: q4_0 and int8-channel, the sweep"
"$build/bench/quant_bench" \
  --benchmark_filter='(quant/(int8-channel|q4_0)|sweep/plan-7-formats)/f32-4096x4096/threads:1' \
  --benchmark_format=json --benchmark_out="$out/quant.json" --benchmark_out_format=json > /dev/null

echo "== the sweep in Python beside NumPy"
/usr/bin/python3 "$here/bench/issue29_numpy.py" "$build/python" | tee "$out/numpy.txt"

echo "== a layer's products on bf16 weights"
"$build/bench/forward_bench" --benchmark_filter='bf16-product/' --benchmark_repetitions=5 \
  --benchmark_format=json --benchmark_out="$out/forward.json" --benchmark_out_format=json \
  > /dev/null

echo "== the 1B shape's forward: lowp eval --weights none (best of 2) beside PyTorch (median of 3)"
for t in 1 2; do
  for i in 1 2; do
    /usr/bin/time -f '%e %M' -o "$dir/time" "$lowp" eval --model "$dir/1b" \
      --tokens "$dir/1b/tokens.npy" --weights none --threads "$t" --quiet > /dev/null
    cat "$dir/time"
  done | sort -n | head -1 | awk -v t="$t" \
    '{printf "{\"tool\": \"lowp eval\", \"threads\": %d, \"seconds\": %s, \"forward_seconds\": %.3f, \"max_rss_bytes\": %d}\n", t, $1, $1 / 2, $2 * 1024}'
  /usr/bin/python3 "$here/bench/torch_forward.py" --checkpoint "$dir/1b" \
    --tokens "$dir/1b/tokens.npy" --threads "$t" --repetitions 3
done | tee "$out/forward-1b.jsonl"
echo "raw outputs in $out"
