#!/bin/sh
# Issue 30's rotation figures: lowp eval on stories3M-hf, and the main pairs
# on stories260K-hf (heads of 8, hidden 64), (held-out TinyStories,
# llama.cpp's perplexity protocol, ctx 256, 60 chunks), each weight and
# activation pair plain and rotated (:rotate=hadamard[N]), and the KV cache
# with llama.cpp's rotation and the scheme's. Usage: bench/issue30_rotation.sh BUILD OUT
set -eu
build=$1
out=$2
mkdir -p "$out"
model=tests/data/stories3M-hf
run() {
  name=$1
  shift
  "$build/cli/lowp" eval --model $model \
    --text tests/data/text/tinystories-valid-heldout.txt --ctx 256 --chunks 60 "$@" \
    > "$out/$name.txt"
}
# W4A16 and W4A8 (QuaRot's int4 weights, int8 per-token activations).
run w4a8 --weights int4-g128,int4-g128:rotate=hadamard \
  --activations none,int8-channel,int8-channel:rotate=hadamard
# W4A4: int4 per-token activations.
run w4a4 --weights int4-g128,int4-g128:rotate=hadamard \
  --activations int4-channel,int4-channel:rotate=hadamard
# MXFP4 weights with MXFP8 or MXFP4 activations, block-wise (32, MR-GPTQ)
# and whole-row rotation; NVFP4 beside it.
run mxfp4 --weights mxfp4,mxfp4:rotate=hadamard32,mxfp4:rotate=hadamard \
  --activations none,mxfp8,mxfp4
run mxfp4-rotated-acts --weights mxfp4:rotate=hadamard32,mxfp4:rotate=hadamard \
  --activations mxfp8:rotate=hadamard32,mxfp4:rotate=hadamard32,mxfp4:rotate=hadamard
run nvfp4 --weights nvfp4,nvfp4:rotate=hadamard16,nvfp4:rotate=hadamard \
  --activations none,nvfp4,nvfp4:rotate=hadamard16
# The KV cache: llama.cpp's rotation (a no-op for heads of 32), blocks of 32
# in the forward pass, and the scheme's own rotation of each head vector.
run kv --weights none \
  --kv q8_0,q8_0:rotate,q8_0:rotate=32,q8_0:rotate=hadamard,q4_0,q4_0:rotate=32,q4_0:rotate=hadamard

model=tests/data/stories260K-hf
run 260K-w4 --weights int4-g32,int4-g32:rotate=hadamard \
  --activations none,int8-channel:rotate=hadamard,int4-channel,int4-channel:rotate=hadamard
run 260K-mxfp4 --weights mxfp4,mxfp4:rotate=hadamard32 --activations none,mxfp4,mxfp4:rotate=hadamard32
run 260K-kv --weights none --kv q8_0,q8_0:rotate=8,q4_0,q4_0:rotate=8
