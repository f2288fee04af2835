#!/usr/bin/env bash
# Issue 29's figures in one run, each beside its peer measured in the same run
# (ggml's reference quantizers, NumPy, memcpy) and, when BEFORE is given,
# beside the same figure of an older build:
#   bench/issue29.sh BUILD OUT [BEFORE] [GGMLBENCH...]
# BUILD   lowp's build directory (bench/, cli/lowp, python/)
# OUT     a directory for the raw outputs (created)
# BEFORE  a directory with quant_bench, convert_bench, lowp and py/lowp (the
#         Python package) of the build to compare with, or '-' for none
# GGMLBENCH  harness binaries built outside the repository against BUILD and
#         ggml's reference (e.g. /work/ggmlref's ggmlbench_kq, ggmlbench_iq:
#         ggml_quantize_chunk, EncodeGgml and codecs' Encode in one process);
#         each is run with no arguments but the repetitions.
# Needs a quiet machine: nothing else should run meanwhile.
set -euo pipefail
build=$(realpath "$1"); out=$2; before=${3:--}; shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
builds=("$build/bench:$build/cli/lowp:$build/python:after")
[[ $before != - ]] && builds=("$before:$before/lowp:$before/py:before" "${builds[@]}")

echo "== machine" | tee "$out/machine.txt"
{ lscpu | grep -E 'Model name|^CPU\(s\)|L2'; uname -r; date -u; } | tee -a "$out/machine.txt"

echo "== ggml's quantizers beside lowp's, one thread, thread CPU time"
for g in "$@"; do "$g" 9 | tee "$out/$(basename "$g").txt"; done
for b in ggml_encode_bench ggml_encode_iq_bench; do
  "$build/bench/$b" --benchmark_format=json --benchmark_out="$out/$b.json" \
    --benchmark_out_format=json > /dev/null
done

quant='quant/(int8-channel|fp8_e4m3fn-channel|fp8_e4m3fn-tensor|nvfp4|q5_1|ggml-mxfp4|ggml-nvfp4|mxfp4|q4_0)/f32-4096x4096/threads:1|sweep/plan-7-formats/f32-4096x4096'
encoders='(memcpy|lowp/(fp8_e4m3fn|fp8_e5m2|int8|int4|fp4_e2m1fn|fp6_e2m3fn|e8m0fnu))/256KiB/threads:1'
for spec in "${builds[@]}"; do
  IFS=: read -r bench cli py name <<< "$spec"
  echo "== $name: quant_bench (schemes at 4096 x 4096, the sweep)"
  "$bench/quant_bench" --benchmark_filter="$quant" --benchmark_format=json \
    --benchmark_out="$out/quant-$name.json" --benchmark_out_format=json > /dev/null
  echo "== $name: convert_bench (encoders in L2 beside memcpy)"
  "$bench/convert_bench" --benchmark_filter="$encoders" --benchmark_format=json \
    --benchmark_out="$out/convert-$name.json" --benchmark_out_format=json > /dev/null
  echo "== $name: Python beside NumPy"
  /usr/bin/python3 "$here/bench/issue29_numpy.py" "$py" | tee "$out/numpy-$name.txt"
  echo "== $name: lowp eval on the bundled models (best of 3, wall / user / sys s)"
  heldout=$here/tests/data/text/tinystories-valid-heldout.txt
  for model in stories260K-hf stories3M-hf; do
    for threads in 1 2; do
      for i in 1 2 3; do
        /usr/bin/time -f "%e %U %S" "$cli" eval --model "$here/tests/data/$model" --text "$heldout" \
          --ctx 256 --chunks 60 --weights int8-channel,q4_0 --threads $threads --quiet \
          > /dev/null 2> "$out/time.txt"
        tail -1 "$out/time.txt"
      done | sort -n | head -1 | sed "s/^/$model threads $threads: /"
    done
  done | tee "$out/eval-$name.txt"
done
rm -f "$out/time.txt"
"$build/bench/forward_bench" --benchmark_filter='^nn/' --benchmark_format=json \
  --benchmark_out="$out/forward-nn.json" --benchmark_out_format=json > /dev/null
echo "raw outputs in $out"
