#!/usr/bin/env python3
"""lowp eval on mixtures of experts at the size of deployed ones, in one run:
random-weight checkpoints written to /tmp (deleted on exit unless
LOWP_SCALE_DIR is set) in their published layouts, then `lowp eval` with four
candidates under /usr/bin/time (%M peak RSS, %e seconds):

  deepseek-v3-4l  DeepSeek-V3's shapes, 4 layers: 3 dense and 1 of 256
                  experts of 2048 (8 per token, 1 shared), multi-head latent
                  attention, FP8 e4m3 weights with 128 x 128 weight_scale_inv,
                  bf16 embedding, norms and lm_head (15.7 GB)
  deepseek-v3-moe the same with its one MoE layer alone (12.7 GB)
  qwen3-30b-a3b-8l Qwen3-30B-A3B's shapes, its first 8 of 48 layers (128
                  experts of 768, 8 per token), bf16 (11.2 GB)

each with --matrices one-at-a-time (every matrix and expert read as the
forward pass reaches it; by default only the experts are at these sizes
but DeepSeek-V3's dense layers, 2.33 GB) and, for Qwen3, --matrices whole
(every expert of a layer in float32, as before).
Tokens: 1 x 128 random ids. Prints one JSON object per line (to OUT if given);
tokens_per_second counts the 128 positions once, whatever the candidates.

usage: bench/moe_scale.py BUILD_DIR [OUT.jsonl] [CASE...]
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

CANDIDATES = "int8-channel,q4_0,nf4,fp8_e4m3fn"
RNG = np.random.default_rng(0)
# Pieces of random bytes repeated through each tensor (writing 10+ GB of
# fresh random numbers would take longer than the runs).
PIECE = 1 << 24
BF16 = (RNG.normal(0, 0.02, PIECE // 2).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
E4M3 = (RNG.integers(0x20, 0x58, PIECE, dtype=np.uint8) | (RNG.integers(0, 2, PIECE, dtype=np.uint8) << 7)).tobytes()
ONES = np.full(PIECE // 2, 0x3F80, np.uint16).tobytes()  # bf16 1.0: norm weights


def deepseek(layers, dense):
    """(config, [(name, dtype, shape, fill)]) of DeepSeek-V3's shapes."""
    config = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 129280,
        "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "num_hidden_layers": layers, "num_attention_heads": 128, "num_key_value_heads": 128,
        "n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "qk_nope_head_dim": 128, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
        "num_experts_per_tok": 8, "moe_layer_freq": 1, "first_k_dense_replace": dense,
        "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu",
        "max_position_embeddings": 163840, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1,
                                              "mscale": 1.0, "mscale_all_dim": 1.0,
                                              "original_max_position_embeddings": 4096},
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]},
    }
    tensors = [("model.embed_tokens.weight", "BF16", (129280, 7168), BF16)]

    def fp8(name, rows, cols):
        tensors.append((name + ".weight", "F8_E4M3", (rows, cols), E4M3))
        tensors.append((name + ".weight_scale_inv", "F32", (-(-rows // 128), -(-cols // 128)), None))

    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.append((p + "input_layernorm.weight", "BF16", (7168,), ONES))
        a = p + "self_attn."
        fp8(a + "q_a_proj", 1536, 7168)
        tensors.append((a + "q_a_layernorm.weight", "BF16", (1536,), ONES))
        fp8(a + "q_b_proj", 128 * 192, 1536)
        fp8(a + "kv_a_proj_with_mqa", 576, 7168)
        tensors.append((a + "kv_a_layernorm.weight", "BF16", (512,), ONES))
        fp8(a + "kv_b_proj", 128 * 256, 512)
        fp8(a + "o_proj", 7168, 128 * 128)
        tensors.append((p + "post_attention_layernorm.weight", "BF16", (7168,), ONES))
        m = p + "mlp."
        if i < dense:
            for name, rows, cols in (("gate_proj", 18432, 7168), ("up_proj", 18432, 7168), ("down_proj", 7168, 18432)):
                fp8(m + name, rows, cols)
            continue
        tensors.append((m + "gate.weight", "BF16", (256, 7168), BF16))
        tensors.append((m + "gate.e_score_correction_bias", "F32", (256,), None))
        for e in [f"experts.{j}." for j in range(256)] + ["shared_experts."]:
            for name, rows, cols in (("gate_proj", 2048, 7168), ("up_proj", 2048, 7168), ("down_proj", 7168, 2048)):
                fp8(m + e + name, rows, cols)
    tensors.append(("model.norm.weight", "BF16", (7168,), ONES))
    tensors.append(("lm_head.weight", "BF16", (129280, 7168), BF16))
    return config, tensors


def qwen3_moe(layers):
    """Qwen3-30B-A3B's shapes, its first `layers` layers, bf16."""
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,
        "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
        "num_hidden_layers": layers, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": False, "use_sliding_window": False,
        "hidden_act": "silu", "torch_dtype": "bfloat16",
    }
    tensors = [("model.embed_tokens.weight", "BF16", (151936, 2048), BF16)]
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.append((p + "input_layernorm.weight", "BF16", (2048,), ONES))
        for name, rows, cols in (("q_proj", 4096, 2048), ("k_proj", 512, 2048), ("v_proj", 512, 2048),
                                 ("o_proj", 2048, 4096)):
            tensors.append((p + "self_attn." + name + ".weight", "BF16", (rows, cols), BF16))
        tensors.append((p + "self_attn.q_norm.weight", "BF16", (128,), ONES))
        tensors.append((p + "self_attn.k_norm.weight", "BF16", (128,), ONES))
        tensors.append((p + "post_attention_layernorm.weight", "BF16", (2048,), ONES))
        tensors.append((p + "mlp.gate.weight", "BF16", (128, 2048), BF16))
        for j in range(128):
            e = p + f"mlp.experts.{j}."
            for name, rows, cols in (("gate_proj", 768, 2048), ("up_proj", 768, 2048), ("down_proj", 2048, 768)):
                tensors.append((e + name + ".weight", "BF16", (rows, cols), BF16))
    tensors.append(("model.norm.weight", "BF16", (2048,), ONES))
    tensors.append(("lm_head.weight", "BF16", (151936, 2048), BF16))
    return config, tensors


WIDTH = {"BF16": 2, "F8_E4M3": 1, "F32": 4}


def write(directory, config, tensors):
    """config.json and model.safetensors: F32 tensors (block scales, the score
    bias) hold 0.004 and 0; the others repeat their piece."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    header, offset = {}, 0
    for name, dtype, shape, _ in tensors:
        size = WIDTH[dtype] * int(np.prod(shape))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    scale = np.float32(0.004).tobytes()  # codes of 2^-4..2^3 times this: weights of 2.5e-4..0.03
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, dtype, shape, fill in tensors:
            size = WIDTH[dtype] * int(np.prod(shape))
            if fill is None:
                f.write((b"\0\0\0\0" if name.endswith("bias") else scale) * (size // 4))
                continue
            for start in range(0, size, len(fill)):
                f.write(fill[:min(len(fill), size - start)])
    return os.path.getsize(os.path.join(directory, "model.safetensors"))


CASES = {
    "deepseek-v3-4l": (lambda: deepseek(4, 3), 129280, ["one-at-a-time"]),
    "deepseek-v3-moe": (lambda: deepseek(1, 0), 129280, ["one-at-a-time"]),
    "qwen3-30b-a3b-8l": (lambda: qwen3_moe(8), 151936, ["one-at-a-time", "whole"]),
}


def Mean(candidate, key):
    """A routing field's mean over the layers with experts."""
    layers = candidate["routing"]
    return sum(layer[key] for layer in layers) / max(1, len(layers))


def main():
    build = os.path.abspath(sys.argv[1])
    out = open(sys.argv[2], "w") if len(sys.argv) > 2 else sys.stdout
    cases = sys.argv[3:] or list(CASES)
    root = os.environ.get("LOWP_SCALE_DIR") or tempfile.mkdtemp(prefix="lowp-moe-scale.")
    try:
        for case in cases:
            make, vocab, modes = CASES[case]
            directory = os.path.join(root, case)
            file_bytes = write(directory, *make())
            tokens = os.path.join(directory, "tokens.npy")
            np.save(tokens, np.random.default_rng(1).integers(0, vocab, (1, 128)).astype(np.int32))
            for experts in modes:
                report = os.path.join(directory, "eval.json")
                timing = os.path.join(directory, "time")
                with open(report, "w") as r:
                    subprocess.run(["/usr/bin/time", "-o", timing, "-f", "%M %e", os.path.join(build, "cli/lowp"),
                                    "eval", "--model", directory, "--tokens", tokens, "--weights", CANDIDATES,
                                    "--matrices", experts, "--threads", "2", "--json", "--quiet"],
                                   stdout=r, check=True)
                kib, seconds = open(timing).read().split()
                result = json.load(open(report))
                print(json.dumps({
                    "tool": "lowp eval", "case": case, "matrices": experts, "candidates": CANDIDATES,
                    "tokens": 128, "max_rss_bytes": int(kib) * 1024, "seconds": float(seconds),
                    "tokens_per_second": 128 / float(seconds), "file_bytes": file_bytes,
                    "kl_mean": {c["label"]: c["kl_mean"] for c in result["candidates"]},
                    "routing_topk_set_agreement": {c["label"]: Mean(c, "topk_set_agreement")
                                                   for c in result["candidates"]},
                    "routing_top1_changed": {c["label"]: Mean(c, "top1_changed") for c in result["candidates"]},
                }), file=out, flush=True)
            shutil.rmtree(directory)
    finally:
        if not os.environ.get("LOWP_SCALE_DIR"):
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
