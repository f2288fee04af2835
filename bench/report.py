#!/usr/bin/env python3
"""Turns convert_bench's JSON (--benchmark_format=json) into the markdown
table of bench/README.md: median bytes/s (read + written, in GB/s = 1e9) per
case and size, and the ratios the kernels issue sets as targets.

Given quant_bench's JSON (one or more files, runs of the same binary), makes
the quant-error tables instead: median input bytes/s per scheme, input and
thread count with its ratio to memcpy of the same bytes in the same run, the
goal ratios, and the stories260K checkpoint's wall time. With several files
every figure is the median over the files of each run's median (and the
goal table lists each run's ratio)."""
import json
import statistics
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


QUANT_INPUTS = ["f32-64x4096", "f32-4096x4096", "bf16-64x4096", "bf16-4096x4096"]
INPUT_LABEL = {
    "f32-64x4096": "f32 64x4096 (1 MiB)",
    "f32-4096x4096": "f32 4096x4096 (64 MiB)",
    "bf16-64x4096": "bf16 64x4096 (512 KiB)",
    "bf16-4096x4096": "bf16 4096x4096 (32 MiB)",
}
GOAL_SCHEMES = ["int8-channel", "int4-g128", "fp8_e4m3fn", "mxfp4"]
GOAL_RATIO = 0.5


def is_quant(runs):
    return any(b["run_name"].startswith(("quant/", "checkpoint/")) for b in runs["benchmarks"])


def quant_medians(runs):
    """(case, input, threads) -> GB/s of input bytes, and checkpoint ms."""
    rate, checkpoint = {}, {}
    for b in runs["benchmarks"]:
        if b.get("aggregate_name", "median") != "median" or b.get("error_occurred"):
            continue
        parts = b["run_name"].split("/min_time")[0].split("/")
        threads = int(parts[-1].split(":")[1])
        if parts[0] == "checkpoint":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            checkpoint[("/".join(parts[1:-1]), threads)] = b["real_time"] * scale
        else:
            case = "memcpy" if parts[0] == "memcpy" else parts[1]
            rate[(case, parts[-2], threads)] = b["bytes_per_second"] / 1e9
    return rate, checkpoint


def median_over(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def quant_main(paths):
    all_runs = [quant_medians(json.load(open(p))) for p in paths]
    rates = [r for r, _ in all_runs]
    keys = []
    for r in rates:
        for k in r:
            if k not in keys:
                keys.append(k)
    threads = sorted({t for _, _, t in keys})
    cases = []
    for case, _, _ in keys:
        if case not in cases:
            cases.append(case)

    def rate(case, inp, t):
        return median_over([r.get((case, inp, t)) for r in rates])

    def ratio_in(r, case, inp, t):
        a, m = r.get((case, inp, t)), r.get(("memcpy", inp, t))
        return None if a is None or m is None else a / m

    def ratio(case, inp, t):  # the median over runs of each run's own ratio
        return median_over([ratio_in(r, case, inp, t) for r in rates])

    runs_note = f"median of {len(paths)} runs" if len(paths) > 1 else "one run"
    for dtype in ["f32", "bf16"]:
        inputs = [i for i in QUANT_INPUTS if i.startswith(dtype + "-")
                  and any(k[1] == i for k in keys)]
        if not inputs:
            continue
        cols = [(i, t) for i in inputs for t in threads]
        print(f"GB/s of {dtype} input (x memcpy of the same bytes, same threads, same run; "
              f"{runs_note})")
        print()
        print("| scheme | " + " | ".join(f"{INPUT_LABEL[i]}, {t} thr" for i, t in cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for case in cases:
            if not any(rate(case, i, t) is not None for i, t in cols):
                continue
            cells = []
            for i, t in cols:
                v = rate(case, i, t)
                if v is None:
                    cells.append("")
                elif case == "memcpy":
                    cells.append(f"{v:.2f}")
                else:
                    cells.append(f"{v:.2f} ({ratio(case, i, t):.2f}x)")
            print(f"| {case} | " + " | ".join(cells) + " |")
        print()

    print(f"Goal: quant-error of {', '.join(GOAL_SCHEMES)} at >= {GOAL_RATIO}x memcpy of the "
          "same bytes, one thread")
    print()
    per_run = " | ".join(f"run {k + 1}" for k in range(len(rates))) if len(rates) > 1 else ""
    print("| scheme | input | quant / memcpy GB/s | ratio | goal | met |"
          + (f" {per_run} |" if per_run else ""))
    print("|---|---|---|---:|---:|---|" + ("---:|" * len(rates) if per_run else ""))
    t1 = threads[0]
    for case in GOAL_SCHEMES:
        for inp in [i for i in QUANT_INPUTS if i.startswith("f32-")]:
            r = ratio(case, inp, t1)
            if r is None:
                continue
            met = "yes" if r >= GOAL_RATIO else "**no**"
            line = (f"| {case} | {INPUT_LABEL[inp]} | {rate(case, inp, t1):.2f} / "
                    f"{rate('memcpy', inp, t1):.2f} | {r:.2f}x | {GOAL_RATIO}x | {met} |")
            if per_run:
                line += " " + " | ".join(
                    "" if ratio_in(x, case, inp, t1) is None else f"{ratio_in(x, case, inp, t1):.2f}x"
                    for x in rates) + " |"
            print(line)

    checkpoints = [c for _, c in all_runs]
    ckeys = []
    for c in checkpoints:
        for k in c:
            if k not in ckeys:
                ckeys.append(k)
    if ckeys:
        print()
        print("| checkpoint | threads | wall time (ms) |" + (f" {per_run} |" if per_run else ""))
        print("|---|---:|---:|" + ("---:|" * len(rates) if per_run else ""))
        for name, t in ckeys:
            v = median_over([c.get((name, t)) for c in checkpoints])
            line = f"| {name} | {t} | {v:.1f} |"
            if per_run:
                line += " " + " | ".join(
                    "" if c.get((name, t)) is None else f"{c[(name, t)]:.1f}"
                    for c in checkpoints) + " |"
            print(line)


if __name__ == "__main__":
    first = json.load(open(sys.argv[1]))
    if is_quant(first):
        quant_main(sys.argv[1:])
    else:
        main(sys.argv[1])
