#!/usr/bin/env python3
"""Turns convert_bench's JSON (--benchmark_format=json) into the markdown
table of bench/README.md: median bytes/s (read + written, in GB/s = 1e9) per
case and size, and the ratios the kernels issue sets as targets."""
import json
import sys


def main(path):
    runs = json.load(open(path))
    sizes = ["256KiB", "64MiB", "1GiB"]
    median = {}  # (case without its size, size) -> GB/s
    cases = []
    for b in runs["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        parts = b["run_name"].split("/min_time")[0].split("/")
        size = next(p for p in parts if p in sizes)
        key = "/".join(p for p in parts if p != size)
        median[(key, size)] = b["bytes_per_second"] / 1e9
        if key not in cases:
            cases.append(key)

    def get(key, size):
        return median.get((key, size))

    print("| case | " + " | ".join(sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for key in cases:
        cells = []
        for size in sizes:
            v = get(key, size)
            cells.append("" if v is None else f"{v:.2f}")
        print(f"| {key} | " + " | ".join(cells) + " |")

    def ratio(a, b, size):
        x, y = get(a, size), get(b, size)
        return None if x is None or y is None else x / y

    print()
    print("| target | measured | ratio | goal |")
    print("|---|---|---:|---:|")
    t1 = "/threads:1"

    def cpu(name):  # the widest form of an instruction that was measured
        zmm = f"cpu/{name}-zmm"
        return zmm if get(zmm, "256KiB") is not None else f"cpu/{name}-ymm"

    bf16_base = "cpu/vcvtneps2bf16-zmm"
    if get(bf16_base, "256KiB") is None:
        bf16_base = cpu("vcvtps2ph")
    checks = [
        ("f32->f16 in L2 vs vcvtps2ph", "lowp/fp16" + t1, cpu("vcvtps2ph"), "256KiB", 0.9),
        ("f32->f16 at 1 GiB vs memcpy", "lowp/fp16" + t1, "memcpy" + t1, "1GiB", 0.8),
        (f"f32->bf16 in L2 vs {bf16_base.split('/')[1]}", "lowp/bf16" + t1, bf16_base, "256KiB",
         0.9),
        ("f32->bf16 at 1 GiB vs memcpy", "lowp/bf16" + t1, "memcpy" + t1, "1GiB", 0.8),
        ("f16->f32 in L2 vs vcvtph2ps", "lowp/fp16->f32" + t1, cpu("vcvtph2ps"), "256KiB", 0.9),
        ("f16->f32 at 1 GiB vs memcpy", "lowp/fp16->f32" + t1, "memcpy" + t1, "1GiB", 0.8),
        ("bf16->f32 at 1 GiB vs memcpy", "lowp/bf16->f32" + t1, "memcpy" + t1, "1GiB", 0.8),
    ]
    for f in ["fp8_e4m3fn", "fp8_e5m2", "int8", "int4", "fp4_e2m1fn"]:
        checks.append((f"f32->{f} in L2 vs memcpy", f"lowp/{f}" + t1, "memcpy" + t1, "256KiB", 0.5))
        ref = f"reference/{f}"
        if get(ref, "256KiB") is not None:
            checks.append((f"f32->{f} in L2 vs reference loop", f"lowp/{f}" + t1, ref, "256KiB", 20))
    for f in ["fp16", "bf16", "fp8_e4m3fn", "int4"]:
        threads = [k for k in cases if k.startswith(f"lowp/{f}/threads:") and not k.endswith(":1")]
        for t in threads:
            checks.append((f"f32->{f} at 1 GiB, all threads vs one", t, f"lowp/{f}" + t1, "1GiB", 1.7))
    for label, a, b, size, goal in checks:
        r = ratio(a, b, size)
        if r is None:
            continue
        print(f"| {label} | {get(a, size):.2f} / {get(b, size):.2f} GB/s | {r:.2f}x | {goal}x |")


if __name__ == "__main__":
    main(sys.argv[1])
