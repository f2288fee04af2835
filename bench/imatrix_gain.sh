#!/bin/sh
# What an importance matrix buys on the bundled stories3M-hf, in one run:
#   - splits the held-out TinyStories text (tests/data/text/
#     tinystories-valid-heldout.txt, which the model was not trained on) at
#     the paragraph break nearest its middle: the first half calibrates, the
#     second half evaluates;
#   - `lowp imatrix` on the first half (chunks of 256 tokens, the model's
#     context);
#   - `lowp eval --text` on the second half (llama.cpp's perplexity protocol,
#     ctx 256) of llama.cpp's mixes without and with --imatrix, and of the
#     mixes that exist only with one;
# and prints each eval's JSON on a line of its own (to OUT if given), then a
# Markdown table: mix, bits per weight, llama.cpp's mean KLD and PPL ratio
# (with their +-) without and with the imatrix.
#
# usage: bench/imatrix_gain.sh BUILD_DIR [OUT.jsonl]
set -eu
build=${1:?usage: bench/imatrix_gain.sh BUILD_DIR [OUT.jsonl]}
out=${2:-}
build=$(cd "$build" && pwd)
lowp="$build/cli/lowp"
src=$(cd "$(dirname "$0")/.." && pwd)
model="$src/tests/data/stories3M-hf"
text="$src/tests/data/text/tinystories-valid-heldout.txt"
dir=$(mktemp -d /tmp/lowp-imatrix-gain.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM

/usr/bin/python3 - "$text" "$dir" <<'EOF'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
half = len(text) // 2
cut = text.find("\n\n", half)
open(sys.argv[2] + "/calibrate.txt", "w", encoding="utf-8").write(text[:cut] + "\n")
open(sys.argv[2] + "/evaluate.txt", "w", encoding="utf-8").write(text[cut:].lstrip("\n"))
EOF

"$lowp" imatrix --model "$model" --text "$dir/calibrate.txt" --ctx 256 \
  --out "$dir/imatrix.gguf" --quiet
plain="Q4_K_M,Q4_K_S,Q3_K_M,Q2_K,IQ4_XS,Q4_0"
needs="Q2_K_S,IQ3_M,IQ3_S,IQ3_XS,IQ3_XXS,IQ2_M,IQ2_S,IQ2_XS,IQ2_XXS,IQ1_M,IQ1_S"
run() {  # run NAME ARGS...: eval's JSON into $dir/NAME.json
  name=$1
  shift
  "$lowp" eval --model "$model" --text "$dir/evaluate.txt" --ctx 256 --json --quiet "$@" \
    > "$dir/$name.json"
  if [ -n "$out" ]; then cat "$dir/$name.json" >> "$out"; fi
}
run without --weights "$plain"
run with --weights "$plain,$needs" --imatrix "$dir/imatrix.gguf"

/usr/bin/python3 - "$dir" <<'EOF'
import json, sys
objs = [json.load(open(f"{sys.argv[1]}/{name}.json")) for name in ("without", "with")]
def rows(r): return {c["label"]: c for c in r["candidates"]}
without, with_ = rows(objs[0]), rows(objs[1])
r1 = objs[1]
ppl = next(iter(with_.values()))["llama_cpp"]["ppl_base"]["value"]
print(f"stories3M-hf, {r1['text']['chunks']} chunks of {r1['text']['ctx']} held-out tokens "
      f"(scored from {r1['text']['scored_from']}); PPL(f32) {ppl:.4f}")
print(f"| mix | bits/w | mean KLD, no imatrix | mean KLD, imatrix | change | PPL ratio, no imatrix | PPL ratio, imatrix |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for label, c in with_.items():
    kl1 = c["llama_cpp"]["kld"]; pr1 = c["llama_cpp"]["ppl_ratio"]
    bpw = c["weights_bits_per_weight"]
    f = lambda e, k=6: f"{e['value']:.{k}f} ± {e['uncertainty']:.{k}f}"
    if label in without:
        c0 = without[label]; kl0 = c0["llama_cpp"]["kld"]; pr0 = c0["llama_cpp"]["ppl_ratio"]
        print(f"| {label} | {bpw:.3f} | {f(kl0)} | {f(kl1)} | {100*(kl1['value']/kl0['value']-1):+.1f}% | {f(pr0,4)} | {f(pr1,4)} |")
    else:
        print(f"| {label} | {bpw:.3f} | (refused) | {f(kl1)} | | | {f(pr1,4)} |")
EOF
