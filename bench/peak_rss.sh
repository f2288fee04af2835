#!/bin/sh
# Peak resident memory of quant-error over checkpoints many times larger than
# the driver's buffers (batches of 2^22 elements, 16 MiB of float32, plus a
# 128 KiB chunk per thread): writes temporary safetensors files under /tmp
# with quant_bench --write-safetensors (deleted on exit), runs
#   - the lowp CLI (`lowp quant-error FILE --scheme S`) under /usr/bin/time
#     (%M: the process's peak RSS in KiB),
#   - quant_bench --peak-rss (the same loop in-process, getrusage ru_maxrss),
#     with and without TensorSet::Release after each tensor,
# and prints one JSON array (to OUT if given).
#
# usage: bench/peak_rss.sh BUILD_DIR [OUT.json]
set -eu
build=${1:?usage: bench/peak_rss.sh BUILD_DIR [OUT.json]}
out=${2:-}
build=$(cd "$build" && pwd)
bench="$build/bench/quant_bench"
lowp="$build/cli/lowp"
dir=$(mktemp -d /tmp/lowp-peak-rss.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM

results="$dir/results"
: >"$results"

# cli FILE SCHEMES: peak RSS and wall time of the lowp CLI.
cli() {
  /usr/bin/time -o "$dir/time" -f '%M %e' "$lowp" quant-error "$1" --scheme "$2" >/dev/null 2>&1
  read -r kib seconds <"$dir/time"
  printf '{"tool": "lowp quant-error", "file": "%s", "file_bytes": %s, "schemes": "%s", "max_rss_bytes": %s, "seconds": %s}\n' \
    "$(basename "$1")" "$(stat -c %s "$1")" "$2" "$((kib * 1024))" "$seconds" >>"$results"
}

# inproc FILE SCHEMES [--no-release]: quant_bench --peak-rss.
inproc() {
  (cd "$(dirname "$1")" && "$bench" --peak-rss="$(basename "$1")" --scheme="$2" ${3:-}) | sed 's/^{/{"tool": "quant_bench --peak-rss", /' >>"$results"
}

# A process's own footprint, on a file of 1.2 MB.
small="$(dirname "$0")/../tests/data/stories260K/stories260K.f32.safetensors"
if [ -f "$small" ]; then cli "$small" int8-channel; fi

# 6 tensors of 256 MiB (1.5 GiB); then one tensor of 1 GiB.
six="$dir/six-256MiB.safetensors"
"$bench" --write-safetensors="$six" --tensors=6 --rows=16384 --cols=4096
cli "$six" int8-channel
cli "$six" int8-channel,int4-g128,fp8_e4m3fn,mxfp4
inproc "$six" int8-channel
inproc "$six" int8-channel --no-release
rm -f "$six"

one="$dir/one-1GiB.safetensors"
"$bench" --write-safetensors="$one" --tensors=1 --rows=65536 --cols=4096
cli "$one" int8-channel
rm -f "$one"

json=$(awk 'BEGIN { printf "[\n" } { printf "%s  %s", (NR > 1 ? ",\n" : ""), $0 } END { printf "\n]\n" }' "$results")
if [ -n "$out" ]; then printf '%s' "$json" >"$out"; else printf '%s' "$json"; fi
