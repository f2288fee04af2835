#!/usr/bin/env python3
"""Turns convert_bench's JSON (--benchmark_format=json) into the markdown
table of bench/README.md: median bytes/s (read + written, in GB/s = 1e9) per
case and size, and the ratios the kernels issue sets as targets.

Given quant_bench's JSON (one or more files, runs of the same binary), makes
the quant-error tables instead: median input bytes/s per scheme, input and
thread count with its ratio to memcpy of the same bytes in the same run, the
goal ratios, and the stories260K checkpoint's wall time. With several files
every figure is the median over the files of each run's median (and the
goal table lists each run's ratio).

Given forward_bench's JSON and bench/torch_forward.py's (both in Google
Benchmark's layout, taken in the same run), makes the forward tables: prefill
tokens/s of lowp beside PyTorch with their ratio and each one's GFLOP/s as a
fraction of the best square sgemm at the same threads, the sgemm rates, where
the 1B shape's forward time goes (each product at its shape's sgemm rate),
and the added cost of each emulated site. With several files of one program
every figure is the median over the files."""
import json
import re
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


# --- forward_bench and bench/torch_forward.py ---------------------------------

FORWARD_PREFIXES = ("forward/", "torch/", "torch-split:", "sgemm")
WIDE = "llama-3.2-1b-shape-2l"
# The products of one 128-token prefill of the 1B shape (2 layers), by the
# sgemm case of their shape: q and o, k and v, gate and up, down per layer,
# the scores and values products per head and layer, lm_head once.
WIDE_PRODUCTS = [
    ("q_proj, o_proj", "sgemm/128x2048x2048", 2 * 2),
    ("k_proj, v_proj", "sgemm/128x512x2048", 2 * 2),
    ("gate_proj, up_proj", "sgemm/128x8192x2048", 2 * 2),
    ("down_proj", "sgemm/128x2048x8192", 2),
    ("scores (q k^T per head)", "sgemm/128x128x64", 32 * 2),
    ("probabilities x values", "sgemm-nn/128x64x128", 32 * 2),
    ("lm_head", "sgemm/128x128256x2048", 1),
]


def is_forward(runs):
    return any(b["run_name"].startswith(FORWARD_PREFIXES) for b in runs["benchmarks"])


def forward_medians(runs):
    """case -> the median entry (time in ms and counters) of one file."""
    out = {}
    for b in runs["benchmarks"]:
        if b.get("aggregate_name", "median") != "median" or b.get("error_occurred"):
            continue
        name = b["run_name"].split("/min_time")[0]
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        out[name] = dict(b, ms=b["real_time"] * scale)
    return out


def forward_main(paths):
    """Files of forward_bench and torch_forward.py; the k-th file of each
    program make run k. Each figure is the median over runs of that run's
    own figure (a ratio: of the two programs' figures in the same run)."""
    files = [json.load(open(p)) for p in paths]
    for path, f in zip(paths, files):
        c = f.get("context", {})
        load = c.get("load_avg")
        print(f"{path}: {c.get('executable', '')}, OpenBLAS core {c.get('openblas_core')} "
              f"(OPENBLAS_CORETYPE {c.get('OPENBLAS_CORETYPE')}), load average "
              + (" ".join(f"{x:.2f}" for x in load) if load else "?")
              + (f", torch {c['torch']}" if "torch" in c else ""))
    print()
    is_torch = [f.get("context", {}).get("executable", "").endswith("torch_forward.py")
                for f in files]
    lowp_runs = [forward_medians(f) for f, t in zip(files, is_torch) if not t]
    torch_runs = [forward_medians(f) for f, t in zip(files, is_torch) if t]
    # Run k: the k-th file of each program (a run without a torch file has
    # no torch figures).
    runs = [dict(**l, **(torch_runs[k] if k < len(torch_runs) else {}))
            for k, l in enumerate(lowp_runs)]
    runs_note = f"median of {len(runs)} runs" if len(runs) > 1 else "one run"

    def at(r, case, field):
        return r[case].get(field) if case in r else None

    def over_runs(fn):  # the median over runs of fn(run), where defined
        return median_over([fn(r) for r in runs])

    def get(case, field):
        return over_runs(lambda r: at(r, case, field))

    def quotient(a, b):
        return None if a is None or b is None else a / b

    cases = []
    for r in runs:
        for k in r:
            if k not in cases:
                cases.append(k)

    def threads_of(case):
        return int(re.search(r"threads:(\d+)$", case).group(1))

    def peak(r, t):  # the best square sgemm measured at t threads in run r
        rates = [at(r, c, "gflops") for c in (f"sgemm-nn/2048x2048x2048/threads:{t}",
                                               f"sgemm-blas-threads:{t}/2048x2048x2048")]
        rates = [x for x in rates if x is not None]
        return max(rates) if rates else None

    def fmt(v, spec, unit=""):
        return "" if v is None else f"{v:{spec}}{unit}"

    print(f"Prefill of 128 tokens per sequence, {runs_note}: tokens/s, lowp beside PyTorch "
          "(torch: set_num_threads(T) and OpenBLAS T threads; best split: the fastest of that, "
          "OpenMP 1 + BLAS T and OpenMP T + BLAS 1); GFLOP/s as a fraction of the best "
          "2048^3 sgemm at the same threads in the same run")
    print()
    per_run = len(runs) > 1
    print("| model | seqs | threads | lowp tokens/s | torch tokens/s | lowp / torch | "
          "torch, best split | lowp / best | lowp GFLOP/s | lowp / sgemm peak | "
          "torch / sgemm peak | logits mean lowp, torch |"
          + (" lowp / torch per run |" if per_run else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|" + ("---|" if per_run else ""))
    for case in cases:
        if not case.startswith("forward/") or "/none/" not in case:
            continue
        rest = case[len("forward/"):]
        model, _, seqs, _, threads = rest.split("/")
        t = threads.split(":")[1]
        torch_case = "torch/" + rest
        split_cases = [c for c in cases
                       if c.startswith("torch-split:") and c.endswith("/" + rest)]

        def best(r):  # (tokens/s, split) of the fastest torch case of a run with splits
            if not any(c in r for c in split_cases):
                return (None, None)
            found = [(at(r, c, "tokens_per_second"),
                      f"omp{t}-blas{t}" if c == torch_case else c.split("/")[0].split(":")[1])
                     for c in [torch_case] + split_cases if at(r, c, "tokens_per_second")]
            return max(found) if found else (None, None)

        best_names = sorted({best(r)[1] for r in runs if best(r)[1] is not None})
        best_name = ", ".join(best_names)

        def ratio(r):
            return quotient(at(r, case, "tokens_per_second"), at(r, torch_case, "tokens_per_second"))

        has_splits = bool(split_cases)
        cells = [
            model, seqs.split(":")[1], t, fmt(get(case, "tokens_per_second"), ".0f"),
            fmt(get(torch_case, "tokens_per_second"), ".0f"), fmt(over_runs(ratio), ".2f", "x"),
            "" if not has_splits else
            fmt(over_runs(lambda r: best(r)[0]), ".0f") + f" ({best_name})",
            "" if not has_splits else
            fmt(over_runs(lambda r: quotient(at(r, case, "tokens_per_second"), best(r)[0])),
                ".2f", "x"),
            fmt(get(case, "gflops"), ".1f"),
            fmt(over_runs(lambda r: quotient(at(r, case, "gflops"), peak(r, int(t)))), ".2f"),
            fmt(over_runs(lambda r: quotient(at(r, torch_case, "gflops"), peak(r, int(t)))),
                ".2f"),
            fmt(get(case, "logits_mean"), ".6g")
            + ("" if get(torch_case, "logits_mean") is None
               else f", {get(torch_case, 'logits_mean'):.6g}")]
        if per_run:
            cells.append(", ".join(fmt(ratio(r), ".2f") for r in runs))
        print("| " + " | ".join(cells) + " |")

    sgemm = [c for c in cases if c.startswith("sgemm")]
    if sgemm:
        print()
        print(f"sgemm GFLOP/s, {runs_note} (MxNxK; sgemm/ is C = A B^T as for a linear layer, "
              "sgemm-nn/ C = A B; threads:2 is two one-thread products at once, "
              "sgemm-blas-threads:2 one product on OpenBLAS's two threads)")
        print()
        print("| case | GFLOP/s |" + (" per run |" if per_run else ""))
        print("|---|---:|" + ("---|" if per_run else ""))
        for c in sgemm:
            line = f"| {c} | {fmt(get(c, 'gflops'), '.1f')} |"
            if per_run:
                line += " " + ", ".join(fmt(at(r, c, "gflops"), ".1f") for r in runs) + " |"
            print(line)

    none = f"forward/{WIDE}/none/seqs:1/tokens:128/threads:1"
    products = [(label, s, count, [int(x) for x in s.split("/")[1].split("x")])
                for label, s, count in WIDE_PRODUCTS]

    def product_ms(r, s, count, mnk):
        rate = at(r, f"{s}/threads:1", "gflops")
        m, n, k = mnk
        return None if rate is None else count * 2 * m * n * k / (rate * 1e9) * 1e3

    def all_products(r):
        parts = [product_ms(r, s, count, mnk) for _, s, count, mnk in products]
        return None if None in parts else sum(parts)

    if get(none, "ms") is not None and over_runs(all_products) is not None:
        print()
        print(f"Where the time of one {WIDE} forward goes (1 thread, {get(none, 'ms'):.1f} ms "
              f"measured, {runs_note}): each product's flops at its shape's sgemm rate in the "
              "same run, as a share of that run's forward")
        print()
        print("| products | shape | count | ms at sgemm rate | share of the forward |")
        print("|---|---|---:|---:|---:|")
        for label, s, count, mnk in products:
            ms = over_runs(lambda r: product_ms(r, s, count, mnk))
            share = over_runs(lambda r: quotient(product_ms(r, s, count, mnk), at(r, none, "ms")))
            print(f"| {label} | {'x'.join(map(str, mnk))} | {count} | {fmt(ms, '.1f')} | "
                  f"{fmt(share, '.1%')} |")
        share = over_runs(lambda r: quotient(all_products(r), at(r, none, "ms")))
        print(f"| all products | | | {fmt(over_runs(all_products), '.1f')} | {fmt(share, '.1%')} |")
        rest = over_runs(lambda r: None if all_products(r) is None or at(r, none, "ms") is None
                         else at(r, none, "ms") - all_products(r))
        print(f"| the rest (norms, RoPE, softmax, SiLU, copies) | | | {fmt(rest, '.1f')} | "
              f"{fmt(None if share is None else 1 - share, '.1%')} |")

    emulated = [c for c in cases if c.startswith(f"forward/{WIDE}/") and "/none/" not in c]
    if emulated:
        print()
        print(f"Added cost of each emulated site, {WIDE}, 1 sequence, 1 thread, {runs_note}: "
              "each iteration runs the emulated forward and the plain one (none), paired; "
              "added: the median over the pairs")
        print()
        print("| site | ms per forward | none, paired (ms) | tokens/s | added ms | added cost |"
              + (" added cost per run |" if per_run else ""))
        print("|---|---:|---:|---:|---:|---:|" + ("---|" if per_run else ""))
        for c in emulated:
            cost = get(c, "added_cost")
            line = (f"| {c.split('/')[2]} | {fmt(get(c, 'ms'), '.1f')} | "
                    f"{fmt(get(c, 'none_ms'), '.1f')} | {fmt(get(c, 'tokens_per_second'), '.1f')} | "
                    f"{fmt(get(c, 'added_ms'), '+.1f')} | "
                    f"{fmt(None if cost is None else cost * 100, '+.1f', '%')} |")
            if per_run:
                line += " " + ", ".join(
                    fmt(None if at(r, c, "added_cost") is None else at(r, c, "added_cost") * 100,
                        "+.1f", "%") for r in runs) + " |"
            print(line)


if __name__ == "__main__":
    first = json.load(open(sys.argv[1]))
    if is_forward(first):
        forward_main(sys.argv[1:])
    elif is_quant(first):
        quant_main(sys.argv[1:])
    else:
        main(sys.argv[1])
