#!/usr/bin/env python3
"""Runs the GGUF files `lowp quantize --model` writes for each architecture in
llama.cpp itself, and compares llama.cpp's logits with lowp's.

For each case (a tiny random model of the architecture in its published
layout, python/tests/test_forward_torch.py's cases with a 512-token vocabulary
so that stories260K's tokenizer fits), the script

  1. writes the model as GGUF twice: its float32 weights, and `--weights`
     (q8_0 by default);
  2. runs each file in llama.cpp (a peer program, built outside the
     repository: it loads a GGUF file on the CPU, decodes the tokens in one
     batch and writes every position's logits as float32; see bench/README.md)
     with an F32 KV cache and flash attention off;
  3. compares the float32 file's logits with `lowp.forward` of the Hugging
     Face model (what the file holds, exactly): the architecture's layout and
     hyperparameters as llama.cpp reads them; and shows the quantized file
     loads and runs (its top-1 agreement with the float model).

Usage:
  LLAMA_LOGITS=/path/to/llama-logits PYTHONPATH=build/python \\
      python3 bench/llama_cpp_archs.py [--cases a,b] [--weights q8_0] [--tokens 24]

Prints a table: per case, the largest and mean absolute logit difference
relative to the logits' standard deviation, and top-1 agreement. Needs
python3-torch (the random models come from the test oracle's generator).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import torch_reference as ref  # noqa: E402
from test_forward_torch import CASES  # noqa: E402

import lowp  # noqa: E402

CASES = dict(CASES)
CASES["gpt_oss_mxfp4_truncated"] = {**CASES["gpt_oss_mxfp4"], "rope_scaling": {
    **CASES["gpt_oss_mxfp4"]["rope_scaling"], "truncate": True}}

TOKENIZER = os.path.join(ROOT, "tests", "data", "stories260K", "tok512.bin")
LOWP = os.environ.get("LOWP_CLI", os.path.join(ROOT, "build", "cli", "lowp"))

# What llama.cpp can hold of each case: its Phi-3 attends to the whole
# context (its sliding window is switched off), its gpt-oss fixes
# swiglu_limit at 7. Each change is one lowp's writer otherwise refuses.
CHANGES = {
    "qwen2_moe_shared": {},
    "qwen3_moe_renormalized": {"decoder_sparse_step": 1},
    "phi3": {"sliding_window": None},
    # llama.cpp takes the long factors when its context (padded to 256)
    # exceeds the original length (32): with the long factors the short
    # ones, both run the same rotation.
    "phi3_longrope_partial": {"sliding_window": None, "rope_scaling": {
        **CASES["phi3_longrope_partial"]["rope_scaling"],
        "long_factor": CASES["phi3_longrope_partial"]["rope_scaling"]["short_factor"]}},
    # llama.cpp truncates YaRN's correction range whatever the config says
    "gpt_oss_mxfp4": {"swiglu_limit": 7.0},
    "gpt_oss_mxfp4_truncated": {"swiglu_limit": 7.0},
    "gpt_oss_dense": {},
    # llama.cpp's YaRN for DeepSeek takes mscale == mscale_all_dim
    "deepseek_v3_q_lora": {"v_head_dim": 16, "rope_scaling": {
        **CASES["deepseek_v3_q_lora"]["rope_scaling"], "mscale_all_dim": 1.0}},
    "deepseek_v3_fp8": {},
    "llama": {},
    "mixtral_4x2": {"sliding_window": None},
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}:\n{r.stdout}{r.stderr}")
    return r.stdout


def llama_logits(binary, gguf, tokens, vocab):
    with tempfile.NamedTemporaryFile(suffix=".f32") as out:
        env = dict(os.environ, LLAMA_LOGITS_KV_F32="1", LLAMA_LOGITS_FA="0")
        run([binary, gguf, out.name] + [str(t) for t in tokens], env=env)
        return np.fromfile(out.name, dtype=np.float32).reshape(len(tokens), vocab)


def compare(mine, theirs):
    scale = float(np.std(mine))
    diff = np.abs(mine.astype(np.float64) - theirs.astype(np.float64)) / scale
    top1 = float(np.mean(np.argmax(mine, -1) == np.argmax(theirs, -1)))
    return float(diff.max()), float(diff.mean()), top1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CHANGES))
    p.add_argument("--weights", default="q8_0")
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    binary = os.environ.get("LLAMA_LOGITS")
    if not binary or not os.path.exists(binary):
        sys.exit("set LLAMA_LOGITS to llama.cpp's logits program (bench/README.md)")
    rows = []
    rng = np.random.default_rng(0)
    tokens = [1] + list(rng.integers(3, 512, a.tokens - 1))
    for name in a.cases.split(","):
        cfg = {**CASES[name], "vocab_size": 512, **CHANGES[name]}
        cfg = {k: v for k, v in cfg.items() if not (k in CHANGES[name] and v is None)}
        # Rows whole q8_0 blocks (32): the widths matrices are multiplied along.
        for key in ("hidden_size", "intermediate_size", "moe_intermediate_size",
                    "shared_expert_intermediate_size", "kv_lora_rank", "q_lora_rank"):
            if cfg.get(key):
                cfg[key] = -(-cfg[key] // 32) * 32
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model")
            os.makedirs(model)
            ref.save_model(model, cfg, ref.random_model(cfg, list(CASES).index(name.removesuffix('_truncated'))))
            row = {"case": name, "architecture": cfg["model_type"]}
            for weights in ("fp32", a.weights):
                gguf = os.path.join(d, f"{weights}.gguf")
                run([LOWP, "quantize", "--model", model, "--tokenizer", TOKENIZER,
                     "--weights", weights, "--out", gguf])
                theirs = llama_logits(binary, gguf, tokens, 512)
                if weights == "fp32":
                    mine = lowp.forward(model, np.array(tokens))
                    row["f32"] = compare(mine, theirs)
                else:
                    row[weights] = compare(mine, theirs)
            rows.append(row)
            print(json.dumps(row) if a.json else
                  f"{name:24s} {cfg['model_type']:12s} f32: max {row['f32'][0]:.2e} mean "
                  f"{row['f32'][1]:.2e} top-1 {row['f32'][2]:.3f} | {a.weights} vs float model: "
                  f"max {row[a.weights][0]:.2e} top-1 {row[a.weights][2]:.3f}", flush=True)


if __name__ == "__main__":
    main()
