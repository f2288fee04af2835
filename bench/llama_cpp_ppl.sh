#!/bin/bash
# llama-perplexity against `lowp eval --weights-file F --activations ggml`
# on the same GGUF files and text (issue 39's goal: to 1e-4 relative).
#
#   bench/llama_cpp_ppl.sh BUILD LLAMA_PERPLEXITY MODEL_DIR TEXT CTX OUT.tsv FILE.gguf...
#
# LLAMA_PERPLEXITY is a llama.cpp build made outside the repository (see
# bench/README.md for the one measured). For each file: llama.cpp's final
# PPL with its defaults (F16 KV cache, flash attention auto) and with an
# F32 cache without flash attention; lowp's PPL(Q) with --activations
# ggml and --kv fp16 (llama.cpp's default cache) and with --activations
# ggml alone. One thread for llama.cpp (-t 1), two for lowp.
set -euo pipefail
build=$1 ppl=$2 model=$3 text=$4 ctx=$5 out=$6
shift 6
printf 'file\tllama_default\tllama_f32kv_nofa\tlowp_ggml_kvfp16\tlowp_ggml\tlowp_none\n' > "$out"
for f in "$@"; do
  d=$("$ppl" -m "$f" -f "$text" -c "$ctx" -b "$ctx" -t 1 2>&1 | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
  n=$("$ppl" -m "$f" -f "$text" -c "$ctx" -b "$ctx" -t 1 -ctk f32 -ctv f32 -fa off 2>&1 |
      sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
  l=$("$build/cli/lowp" eval --model "$model" --text "$text" --ctx "$ctx" --weights-file "$f" \
        --activations none,ggml --kv none,fp16 --threads 2 --json 2>/dev/null |
      /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
p = {c["label"].split(" ", 1)[1] if " " in c["label"] else "": c["llama_cpp"]["ppl_q"]["value"]
     for c in d["candidates"]}
print("%.6f\t%.6f\t%.6f" % (p["a=ggml kv=fp16"], p["a=ggml"], p[""]))')
  printf '%s\t%s\t%s\t%s\n' "$(basename "$f")" "$d" "$n" "$l" | tee -a "$out"
done
