#!/usr/bin/python3
"""PyTorch's CPU forward of the models bench/forward_bench.cc runs, as its
peer in the same run: the same Llama forward (Hugging Face's LlamaForCausalLM
in float32, eager attention) in plain torch ops, prefill of the same tokens,
tokens/s. Bench only: torch is an optional peer (Debian's python3-torch,
run with /usr/bin/python3), never needed by lowp or its tests.

Cases, named as forward_bench's with "torch/" for "forward/":
  torch/stories260K/none/seqs:8/tokens:128/threads:T
      the bundled model, tests/data/stories260K-hf/model.safetensors (read by
      the small safetensors reader below) and its config.json
  torch/llama-3.2-1b-shape-2l/none/seqs:S/tokens:128/threads:T
      Llama 3.2 1B's shapes with 2 layers, seeded N(0, 0.02^2) weights
      (torch's generator, not forward_bench's: the values differ, the shapes
      and the work do not), norms 1, tied embeddings
The S sequences run as one batch [S, 128] (how one runs them in PyTorch),
under torch.inference_mode, with torch.set_num_threads(T) and OpenBLAS (the
BLAS Debian's torch multiplies with, the same libopenblas.so.0 as lowp's)
set to T threads through openblas_set_num_threads. Torch's OpenMP threads
and OpenBLAS's own pthreads then share the T cores, which can cost a lot on
small products; for T > 1 the same cases also run with T threads split the
other ways (bench/report.py takes the fastest as "torch, best split"):
  torch-split:omp1-blasT/MODEL/...   torch.set_num_threads(1), BLAS T threads
  torch-split:ompT-blas1/MODEL/...   torch.set_num_threads(T), BLAS 1 thread Tokens are
(i * 2654435761 + 1) mod vocab for i = sequence * 128 + position, as in
forward_bench. Each repetition runs the forward until --min-time seconds
have passed (at least once) after one warm-up forward; the median over
repetitions is reported, as Google Benchmark's aggregates.

With --checkpoint DIR --tokens FILE.npy --threads T instead: PyTorch's forward
of a snapshot on disk (bench/eval_scale.sh's peer; rope_scaling ignored, the
same products), one JSON line with its median time and peak RSS.

Writes a JSON file in Google Benchmark's layout (context, benchmarks with
run_name, aggregate_name "median", real_time in ms, counters
tokens_per_second, gflops, flops_per_token, logits_mean) that
bench/report.py reads beside forward_bench's:

  /usr/bin/python3 bench/torch_forward.py --repetitions 3 --out torch.json
"""
import argparse
import ctypes
import datetime
import json
import os
import re
import socket
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F

TOKENS = 128
BUNDLED = "stories260K"
WIDE = "llama-3.2-1b-shape-2l"
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def openblas():
    """The libopenblas torch loaded (ctypes returns the same handle)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libopenblas" in os.path.basename(path):
                lib = ctypes.CDLL(path)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                lib.openblas_get_config.restype = ctypes.c_char_p
                return lib
    return None


def read_safetensors(path):
    """name -> float32 tensor, for F32, F16 and BF16 entries."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        dtype = entry["dtype"]
        if dtype == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        elif dtype == "F16":
            t = torch.frombuffer(raw, dtype=torch.float16).float()
        elif dtype == "BF16":
            t = torch.frombuffer(raw, dtype=torch.bfloat16).float()
        else:
            raise ValueError(f"{path}: {name} is {dtype}, not F32, F16 or BF16")
        out[name] = t.reshape(entry["shape"])
    return out


def bundled_model():
    directory = os.path.join(os.environ.get("LOWP_DATA_DIR", os.path.join(SOURCE, "tests", "data")),
                             "stories260K-hf")
    return checkpoint_model(directory, timing_only=False)


def checkpoint_model(directory, timing_only):
    """A llama snapshot directory (config.json, model.safetensors). With
    `timing_only`, rope_scaling is ignored: the timing of the same products,
    not the same logits (bench/eval_scale.sh)."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    t = read_safetensors(os.path.join(directory, "model.safetensors"))
    config = {
        "hidden": cfg["hidden_size"], "intermediate": cfg["intermediate_size"],
        "layers": cfg["num_hidden_layers"], "heads": cfg["num_attention_heads"],
        "kv_heads": cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
        "head_dim": cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
        "vocab": cfg["vocab_size"], "rope_theta": cfg.get("rope_theta", 10000.0),
        "eps": cfg.get("rms_norm_eps", 1e-6),
    }
    if cfg.get("model_type") != "llama" or cfg.get("hidden_act") != "silu" or \
            (cfg.get("rope_scaling") and not timing_only):
        raise ValueError(f"{directory}: this script runs a plain llama (silu, no rope_scaling)")
    layers = []
    for i in range(config["layers"]):
        p = f"model.layers.{i}."
        layers.append({
            "input_norm": t[p + "input_layernorm.weight"],
            "post_norm": t[p + "post_attention_layernorm.weight"],
            **{k: t[p + f"self_attn.{k}_proj.weight"] for k in "qkvo"},
            **{k: t[p + f"mlp.{k}_proj.weight"] for k in ("gate", "up", "down")},
        })
    embed = t["model.embed_tokens.weight"]
    head = embed if cfg.get("tie_word_embeddings") else t["lm_head.weight"]
    return {"config": config, "embed": embed, "layers": layers, "norm": t["model.norm.weight"],
            "lm_head": head}


def wide_model():
    config = {"hidden": 2048, "intermediate": 8192, "layers": 2, "heads": 32, "kv_heads": 8,
              "head_dim": 64, "vocab": 128256, "rope_theta": 500000.0, "eps": 1e-5}
    torch.manual_seed(0)
    D, I = config["hidden"], config["intermediate"]
    q, kv = config["heads"] * config["head_dim"], config["kv_heads"] * config["head_dim"]

    def normal(*shape):
        return torch.randn(*shape) * 0.02

    embed = normal(config["vocab"], D)
    layers = [{"input_norm": torch.ones(D), "post_norm": torch.ones(D),
               "q": normal(q, D), "k": normal(kv, D), "v": normal(kv, D), "o": normal(D, q),
               "gate": normal(I, D), "up": normal(I, D), "down": normal(D, I)}
              for _ in range(config["layers"])]
    return {"config": config, "embed": embed, "layers": layers, "norm": torch.ones(D),
            "lm_head": embed}


def flops_per_token(c, tokens):
    """forward_bench's count: 2 x (linear + lm_head parameters) + attention."""
    D, I = c["hidden"], c["intermediate"]
    q, kv = c["heads"] * c["head_dim"], c["kv_heads"] * c["head_dim"]
    linear = q * D + 2 * kv * D + D * q + 3 * I * D
    return 2.0 * (linear * c["layers"] + c["vocab"] * D) + \
        4.0 * tokens * c["head_dim"] * c["heads"] * c["layers"]


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(m, tokens):
    """Logits [S, L, vocab] of a prefill of tokens [S, L] from position 0."""
    c = m["config"]
    S, L = tokens.shape
    H, KV, d = c["heads"], c["kv_heads"], c["head_dim"]
    # Angles in float64 as lowp computes them, then float32.
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.arange(L, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    cos, sin = angles.cos().float(), angles.sin().float()
    mask = torch.full((L, L), float("-inf")).triu(1)
    scale = d ** -0.5
    x = F.embedding(tokens, m["embed"])
    for l in m["layers"]:
        h = rms_norm(x, l["input_norm"], c["eps"])
        q = F.linear(h, l["q"]).view(S, L, H, d).transpose(1, 2)
        k = F.linear(h, l["k"]).view(S, L, KV, d).transpose(1, 2)
        v = F.linear(h, l["v"]).view(S, L, KV, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Hugging Face's repeat_kv: query head h reads kv head h // (H / KV).
        k = k[:, :, None].expand(S, KV, H // KV, L, d).reshape(S, H, L, d)
        v = v[:, :, None].expand(S, KV, H // KV, L, d).reshape(S, H, L, d)
        scores = torch.matmul(q, k.transpose(2, 3)) * scale + mask
        p = torch.softmax(scores, dim=-1)
        a = torch.matmul(p, v).transpose(1, 2).reshape(S, L, H * d)
        x = x + F.linear(a, l["o"])
        h = rms_norm(x, l["post_norm"], c["eps"])
        x = x + F.linear(F.silu(F.linear(h, l["gate"])) * F.linear(h, l["up"]), l["down"])
    x = rms_norm(x, m["norm"], c["eps"])
    return F.linear(x, m["lm_head"])


def tokens_for(sequences, vocab):
    ids = [(i * 2654435761 + 1) % vocab for i in range(sequences * TOKENS)]
    return torch.tensor(ids, dtype=torch.long).reshape(sequences, TOKENS)


def run_case(m, sequences, min_time, repetitions):
    tokens = tokens_for(sequences, m["config"]["vocab"])
    with torch.inference_mode():
        logits = forward(m, tokens)  # warm-up
        times, iterations = [], []
        for _ in range(repetitions):
            n, start = 0, time.perf_counter()
            while True:
                logits = forward(m, tokens)
                n += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_time:
                    break
            times.append(elapsed / n)
            iterations.append(n)
    return times, iterations, float(logits[0].double().mean())


def checkpoint_case(args):
    """--checkpoint DIR --tokens FILE.npy: the median forward time of those
    tokens (all sequences as one batch) on --threads threads, one JSON line."""
    import numpy as np
    t = int(args.threads or len(os.sched_getaffinity(0)))
    torch.set_num_threads(t)
    blas = openblas()
    if blas is not None:
        blas.openblas_set_num_threads(t)
    start = time.perf_counter()
    m = checkpoint_model(args.checkpoint, timing_only=True)
    load = time.perf_counter() - start
    tokens = torch.from_numpy(np.load(args.tokens).astype(np.int64))
    with torch.inference_mode():
        forward(m, tokens)  # warm-up
        times = []
        for _ in range(args.repetitions):
            start = time.perf_counter()
            forward(m, tokens)
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    with open("/proc/self/status") as f:
        peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))
    print(json.dumps({"tool": "torch forward", "checkpoint": args.checkpoint,
                      "tokens": list(tokens.shape), "threads": t, "load_seconds": load,
                      "forward_seconds": median, "repetitions": args.repetitions,
                      "tokens_per_second": tokens.numel() / median, "max_rss_bytes": peak,
                      "torch": torch.__version__,
                      "openblas_core": blas.openblas_get_corename().decode() if blas else None}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", help="a llama snapshot directory (with --tokens)")
    parser.add_argument("--tokens", help=".npy token ids [sequences, length]")
    parser.add_argument("--threads", default=None,
                        help="comma-separated thread counts (default: 1 and all CPUs)")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--min-time", type=float, default=0.5)
    parser.add_argument("--filter", default=".", help="regular expression on case names")
    parser.add_argument("--no-splits", dest="splits", action="store_false",
                        help="skip the torch-split: cases")
    parser.add_argument("--out", help="JSON file to write")
    args = parser.parse_args()
    if args.checkpoint:
        checkpoint_case(args)
        return
    cpus = len(os.sched_getaffinity(0))
    threads = sorted({int(t) for t in args.threads.split(",")}) if args.threads else sorted({1, cpus})
    blas = openblas()
    cases = []  # (name, model, sequences, OpenMP threads, BLAS threads)
    for model in (BUNDLED, WIDE):
        for t in threads:
            for s in ([8] if model == BUNDLED else sorted({1, t})):
                rest = f"{model}/none/seqs:{s}/tokens:{TOKENS}/threads:{t}"
                cases.append((f"torch/{rest}", model, s, t, t))
                if t > 1 and args.splits:
                    cases.append((f"torch-split:omp1-blas{t}/{rest}", model, s, 1, t))
                    cases.append((f"torch-split:omp{t}-blas1/{rest}", model, s, t, 1))
    cases = [c for c in cases if re.search(args.filter, c[0])]
    models = {}
    results = []
    print(f"torch {torch.__version__}, OpenBLAS "
          f"{blas.openblas_get_corename().decode() if blas else '(not found)'}, "
          f"{args.repetitions} repetitions", file=sys.stderr)
    for name, model, sequences, t, blas_threads in cases:
        if model not in models:
            models[model] = bundled_model() if model == BUNDLED else wide_model()
        m = models[model]
        torch.set_num_threads(t)
        if blas is not None:
            blas.openblas_set_num_threads(blas_threads)
        times, iterations, logits_mean = run_case(m, sequences, args.min_time, args.repetitions)
        median = statistics.median(times)
        flops = flops_per_token(m["config"], TOKENS)
        tokens = sequences * TOKENS
        results.append({
            "name": name + "_median", "run_name": name, "run_type": "aggregate",
            "aggregate_name": "median", "repetitions": args.repetitions,
            "threads": 1, "iterations": iterations, "real_time": median * 1e3, "time_unit": "ms",
            "repetition_real_times_ms": [x * 1e3 for x in times],
            "tokens_per_second": tokens / median, "items_per_second": tokens / median,
            "gflops": tokens * flops / median / 1e9, "flops_per_token": flops,
            "logits_mean": logits_mean,
        })
        print(f"{name:<60} {median * 1e3:10.1f} ms {tokens / median:12.1f} tokens/s "
              f"logits_mean={logits_mean:.6g}", file=sys.stderr)
    out = {
        "context": {
            "date": datetime.datetime.now().astimezone().isoformat(),
            "host_name": socket.gethostname(), "executable": "bench/torch_forward.py",
            "num_cpus": cpus, "load_avg": list(os.getloadavg()),
            "torch": torch.__version__,
            "openblas_core": blas.openblas_get_corename().decode() if blas else None,
            "openblas_config": blas.openblas_get_config().decode() if blas else None,
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        },
        "benchmarks": results,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2)
    else:
        json.dump(out, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
