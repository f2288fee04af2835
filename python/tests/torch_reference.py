"""An independent float64 oracle for `lowp.forward`: a decoder-only forward
pass written with torch ops from the formulas of Hugging Face transformers'
model families (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, mixtral,
qwen2_moe, qwen3_moe, phi3, gpt_oss, deepseek_v3), not from their code. Also a minimal
safetensors reader/writer (F32/F16/BF16/F64, U8, F8_E4M3), the decoders of the two published
quantized layouts (GPT-OSS's MXFP4 experts, DeepSeek-V3's block-scaled FP8), a random-model
generator, and llama2.c's tokenizer decode (for the greedy-story check).

Where transformers versions differ, the oracle follows its main branch (v5: the
`rope_parameters` of modeling_rope_utils.py, GptOssConfig.swiglu_limit); each such
place says so.

Everything runs in float64 so that the oracle's own rounding (~1e-16) is far
below the float32 error being measured (~1e-6).

    config, weights = load_model(directory)     # weights: float64 tensors
    logits = forward(config, weights, tokens)   # [n, T, vocab] or [T, vocab]
"""

import json
import math
import os
import re
import struct

import numpy as np
import torch

DTYPE = torch.float64

# ------------------------------------------------------------ safetensors

_READ_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "U8": "u1"}


def _e4m3_values():
    """The 256 float8 e4m3fn codes (sign, 4 exponent bits of bias 7, 3 mantissa
    bits; exponent 0 subnormal, no infinities, S.1111.111 NaN)."""
    code = np.arange(256)
    exponent, mantissa = (code >> 3) & 0xF, code & 7
    magnitude = np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    values = np.where(code & 0x80, -magnitude, magnitude)
    values[(code & 0x7F) == 0x7F] = np.nan
    return values.astype(np.float32)  # every e4m3 value is exact in float32


def _e2m1_values():
    """The 16 FP4 E2M1 codes (sign, 2 exponent bits of bias 1, 1 mantissa bit):
    0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (code 8 is -0)."""
    code = np.arange(16)
    exponent, mantissa = (code >> 1) & 3, code & 1
    magnitude = np.where(exponent == 0, mantissa * 0.5, (1 + mantissa / 2) * 2.0 ** (exponent - 1))
    return np.where(code & 8, -magnitude, magnitude)


E4M3 = _e4m3_values()
E2M1 = _e2m1_values()


def _encode(value):
    """(dtype, shape, bytes) of a tensor to write: a uint8 array is U8, any
    other array F32; ("F8_E4M3", uint8 codes), ("BF16", floats, rounded to
    nearest even), ("F16" | "F32" | "F64" | "U8", array) name the dtype."""
    dtype, array = value if isinstance(value, tuple) else (None, value)
    array = np.asarray(array)
    dtype = dtype or ("U8" if array.dtype == np.uint8 else "F32")
    if dtype in ("U8", "F8_E4M3"):
        if array.dtype != np.uint8:
            raise TypeError(f"{dtype} tensors are given as uint8 codes, not {array.dtype}")
        data = array
    elif dtype == "BF16":  # the top half of a float32, rounded to nearest even
        bits = np.ascontiguousarray(array, "<f4").view("<u4").astype(np.uint64)
        data = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    else:
        data = np.asarray(array, _READ_DTYPES[dtype])
    return dtype, list(array.shape), np.ascontiguousarray(data).tobytes()


def _decode(dtype, shape, raw):
    """The numpy array of a tensor's bytes: U8 as uint8, F8_E4M3 and BF16 as
    their exact float32 values, F16/F32/F64 as they are."""
    if dtype == "BF16":  # bfloat16 is the top half of a float32
        array = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    elif dtype == "F8_E4M3":
        array = E4M3[np.frombuffer(raw, np.uint8)]
    else:
        array = np.frombuffer(raw, _READ_DTYPES[dtype])
    return array.reshape(shape)


def write_safetensors(path, tensors, metadata=None):
    """Write `tensors` (name -> array or (dtype, array), see _encode) in the
    given order: 8-byte LE header length, a JSON header padded with spaces to
    a multiple of 8 bytes, then the tensors' bytes back to back."""
    header = {"__metadata__": {"format": "pt", **(metadata or {})}}
    blobs, offset = [], 0
    for name, value in tensors.items():
        dtype, shape, data = _encode(value)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    """name -> numpy array (F64, F32, F16, BF16, F8_E4M3 as floats; U8 as uint8)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = _decode(info["dtype"], info["shape"], data[base + start:base + end])
    return tensors


def save_model(directory, config, tensors, shards=1):
    """config.json plus model.safetensors, or, with shards > 1, the tensors
    split in order over model-0000k-of-0000n.safetensors with the
    model.safetensors.index.json weight map transformers writes."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
        return
    names = list(tensors)
    weight_map = {}
    for k, part in enumerate(np.array_split(np.arange(len(names)), shards)):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(directory, file), {names[i]: tensors[names[i]] for i in part})
        weight_map.update({names[i]: file for i in part})
    total = sum(len(_encode(t)[2]) for t in tensors.values())
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def load_model(directory):
    """(config dict, name -> float64 torch tensor) of a model directory,
    quantized weights decoded (oracle_weights)."""
    directory = os.fspath(directory)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        arrays = read_safetensors(single)
    else:
        with open(os.path.join(directory, "model.safetensors.index.json")) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        arrays = {}
        for file in files:
            arrays.update(read_safetensors(os.path.join(directory, file)))
    return config, oracle_weights(config, arrays)


def decode_mxfp4(blocks, scales):
    """OCP MXFP4 as OpenAI publishes GPT-OSS's experts: blocks [..., G, 16]
    bytes, scales [..., G] E8M0 bytes -> [..., G * 32] float64. Byte b of a
    block holds elements 2b (low nibble) and 2b + 1 (high nibble), E2M1
    codes, all 32 times 2^(scale - 127) (transformers' integrations/mxfp4.py,
    convert_moe_packed_tensors: lut[blk & 0x0F] to the even columns, lut[blk >> 4]
    to the odd ones, then ldexp by scales - 127)."""
    blocks = np.asarray(blocks, dtype=np.int64)
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1)  # [..., G, 16, 2]: elements 2b, 2b + 1
    values = E2M1[codes].reshape(*blocks.shape[:-1], 32)
    values = values * np.exp2(np.asarray(scales, dtype=np.float64) - 127)[..., None]
    return values.reshape(*blocks.shape[:-2], -1)


def dequantize_fp8(weight, scale_inv, block):
    """DeepSeek-V3's block FP8: weight [rows, cols] (e4m3 values) times
    scale_inv [ceil(rows / b0), ceil(cols / b1)], one factor per b0 x b1 block
    (the last blocks partial)."""
    b0, b1 = block
    rows, cols = weight.shape
    scale = np.repeat(np.repeat(np.asarray(scale_inv, np.float64), b0, axis=0), b1, axis=1)
    return np.asarray(weight, np.float64) * scale[:rows, :cols]


def oracle_weights(config, arrays):
    """name -> float64 torch tensor of a checkpoint's arrays, as the forward
    pass reads them: `X.weight` with `X.weight_scale_inv` dequantized by
    quantization_config's weight_block_size (default [128, 128]); GPT-OSS's
    `*_blocks` + `*_scales` decoded and transposed from the published [E, out,
    in] to transformers' GptOssExperts layout [E, in, out] (the transpose(1, 2)
    at the end of convert_moe_packed_tensors)."""
    arrays = dict(arrays)
    block = (config.get("quantization_config") or {}).get("weight_block_size", [128, 128])
    for name in [n for n in arrays if n.endswith(".weight_scale_inv")]:
        weight = name[:-len("_scale_inv")]
        arrays[weight] = dequantize_fp8(arrays[weight], arrays.pop(name), block)
    for name in [n for n in arrays if n.endswith("_blocks")]:
        base = name[:-len("_blocks")]
        arrays[base] = decode_mxfp4(arrays.pop(name), arrays.pop(base + "_scales")).transpose(0, 2, 1)
    return {name: torch.from_numpy(np.array(a, dtype=np.float64)) for name, a in arrays.items()}


# ------------------------------------------------------------ the config

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "mixtral",
            "qwen2_moe", "qwen3_moe", "phi3", "gpt_oss", "deepseek_v3")

# GptOssConfig's rope_parameters when config.json has none (rope_scaling absent
# or null): main sets this YaRN in __post_init__; transformers 4.55's
# __init__ default was the same dict, but an explicit null there meant no scaling.
GPT_OSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                "truncate": False, "original_max_position_embeddings": 4096}


def yarn_mscale(scale, mscale=1.0):
    """YaRN's magnitude correction 0.1 * mscale * ln(scale) + 1 (1 for scale <= 1)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


class Spec:
    """The settings of a config.json that the forward pass needs, with the
    defaults of the contract (HF's where the contract names none)."""

    def __init__(self, config):
        c = config
        self.family = c["model_type"]
        if self.family not in FAMILIES:
            raise ValueError(f"model_type {self.family!r} not in {FAMILIES}")
        gemma = self.family in ("gemma", "gemma2", "gemma3_text")
        self.hidden = c["hidden_size"]
        self.layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or self.hidden // self.heads
        if gemma and not c.get("head_dim"):
            raise ValueError(f"{self.family} configs need head_dim")
        self.vocab = c["vocab_size"]
        gpt_oss, deepseek, phi3 = (self.family == f for f in ("gpt_oss", "deepseek_v3", "phi3"))
        self.eps = c.get("rms_norm_eps", 1e-5 if gpt_oss or phi3 else 1e-6)
        gemma3 = self.family == "gemma3_text"
        self.theta = c.get("rope_theta", 1e6 if gemma3 else 150000.0 if gpt_oss else 10000.0)
        # Gemma 3: the windowed layers' RoPE base, their angles unscaled
        self.local_theta = c.get("rope_local_base_freq", 10000.0) if gemma3 else None
        self.rope_scaling = c.get("rope_scaling") or (GPT_OSS_YARN if gpt_oss else None)
        self.max_positions = c.get("max_position_embeddings", 131072 if gpt_oss else 4096)
        # The pretraining length of yarn / longrope: config.original_max_position_embeddings
        # wins where the config has one (Phi3Config always does, default 4096), else the
        # rope_scaling dict's, else max_position_embeddings (RotaryEmbeddingConfigMixin.
        # standardize_rope_params on main)
        self.original_max = c.get("original_max_position_embeddings", 4096 if phi3 else None) or (
            (self.rope_scaling or {}).get("original_max_position_embeddings", self.max_positions))
        # the rotated dims of each head: the first rope_dim (Phi-3's partial_rotary_factor;
        # DeepSeek-V3's qk_rope_head_dim, its config's head_dim)
        self.rope_dim = int(self.head_dim * c.get("partial_rotary_factor", 1.0)) if phi3 else self.head_dim
        self.tied = c.get("tie_word_embeddings", gemma)

        self.gemma_norm = gemma          # x_hat * (1 + w)
        self.embed_scale = gemma         # embedding * sqrt(hidden)
        self.gelu = gemma                # gelu(tanh) instead of silu
        self.sandwich = self.family in ("gemma2", "gemma3_text")   # four norms per layer
        self.qk_norm = self.family in ("qwen3", "qwen3_moe", "gemma3_text")
        self.moe = self.family == "mixtral"
        self.experts = c.get("num_local_experts", 0)
        self.top_k = c.get("num_experts_per_tok", 0)
        self.renormalize = True
        self.expert_inter = c["intermediate_size"]
        self.moe_layers = [self.moe] * self.layers
        self.shared_inter = 0
        if self.family in ("qwen2_moe", "qwen3_moe"):  # Qwen3MoeConfig's names and defaults
            qwen2 = self.family == "qwen2_moe"
            self.experts = c.get("num_experts", 60 if qwen2 else 128)
            self.top_k = c.get("num_experts_per_tok", 4 if qwen2 else 8)
            self.renormalize = c.get("norm_topk_prob", False)
            self.expert_inter = c.get("moe_intermediate_size", 1408 if qwen2 else 768)
            self.shared_inter = c.get("shared_expert_intermediate_size", 5632) if qwen2 else 0
            step, dense = c.get("decoder_sparse_step", 1), c.get("mlp_only_layers", [])
            self.moe_layers = [i not in dense and self.experts > 0 and (i + 1) % step == 0
                               for i in range(self.layers)]

        bias = bool(c.get("attention_bias", False)) and self.family in (
            "llama", "qwen3", "qwen3_moe", "gemma3_text", "deepseek_v3")
        bias = bias or (gpt_oss and c.get("attention_bias", True))
        self.qkv_bias = bias or self.family in ("qwen2", "qwen2_moe")
        self.o_bias = bias
        self.mlp_bias = self.family == "llama" and bool(c.get("mlp_bias", False))

        self.scaling = self.head_dim ** -0.5
        self.attn_softcap = self.final_softcap = None
        if self.family == "gemma2":
            self.scaling = c["query_pre_attn_scalar"] ** -0.5
            self.attn_softcap = c.get("attn_logit_softcapping")
            self.final_softcap = c.get("final_logit_softcapping")
        if gemma3:
            self.scaling = c.get("query_pre_attn_scalar", 256) ** -0.5
            self.attn_softcap = c.get("attn_logit_softcapping")
            self.final_softcap = c.get("final_logit_softcapping")
        if gpt_oss:  # every layer MoE: a biased router, top-k logits softmaxed, clamped SwiGLU experts
            self.experts = c.get("num_local_experts", 128)
            self.top_k = c.get("num_experts_per_tok", 4)
            self.moe_layers = [True] * self.layers
            # GptOssConfig.swiglu_limit / swiglu_alpha (main; 4.55 hard-coded 7.0 and 1.702)
            self.swiglu_limit = c.get("swiglu_limit", 7.0)
            self.swiglu_alpha = c.get("swiglu_alpha", 1.702)
        if deepseek:  # DeepseekV3Config's names and defaults
            self.experts = c.get("n_routed_experts", 256)
            self.top_k = c.get("num_experts_per_tok", 8)
            self.renormalize = c.get("norm_topk_prob", True)
            self.expert_inter = c.get("moe_intermediate_size", 2048)
            self.shared_inter = self.expert_inter * (c.get("n_shared_experts", 1) or 0)
            self.n_group, self.topk_group = c.get("n_group", 8), c.get("topk_group", 4)
            self.routed_scaling = c.get("routed_scaling_factor", 2.5)
            self.moe_layers = [i >= c.get("first_k_dense_replace", 3) for i in range(self.layers)]
            # MLA
            self.q_lora = c.get("q_lora_rank", 1536)  # null: a plain q_proj
            self.kv_lora = c.get("kv_lora_rank", 512)
            self.nope_dim = c.get("qk_nope_head_dim", 128)
            self.rope_dim = c.get("qk_rope_head_dim", 64)
            self.v_dim = c.get("v_head_dim", 128)
            self.rope_interleave = c.get("rope_interleave", True)
            self.scaling = (self.nope_dim + self.rope_dim) ** -0.5
            rs = self.rope_scaling
            if rs and rs.get("mscale_all_dim"):  # DeepseekV3Attention: softmax scale times mscale^2
                self.scaling *= yarn_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2
        self.windows = [self._window(c, i) for i in range(self.layers)]

    def _window(self, c, layer):
        """The sliding window of `layer` (None: full causal attention)."""
        if self.family in ("mistral", "mixtral", "phi3"):  # Phi-3: every layer, when set
            return c.get("sliding_window")
        if self.family == "gpt_oss":  # layer_types, else the even layers windowed
            types = c.get("layer_types") or [
                "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(self.layers)]
            return c.get("sliding_window", 128) if types[layer] == "sliding_attention" else None
        if self.family in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
            use = c.get("use_sliding_window", False) and layer >= c.get("max_window_layers", 0)
            return c.get("sliding_window") if use else None
        if self.family == "gemma2":
            return c.get("sliding_window") if layer % 2 == 0 else None
        if self.family == "gemma3_text":  # layer_types, else every pattern-th layer global
            types = c.get("layer_types")
            if types is not None:
                sliding = types[layer] == "sliding_attention"
            else:
                sliding = (layer + 1) % c.get("sliding_window_pattern", 6) != 0
            return c.get("sliding_window", 4096) if sliding else None
        return None


def quant_method(config):
    return (config.get("quantization_config") or {}).get("quant_method")


def tensor_shapes(config):
    """name -> (shape, kind) of every tensor the config implies, in file
    order; kind is one of embed, matrix, bias, norm, sinks, score_bias,
    mxfp4_blocks, mxfp4_scales (for random init). A 3-D matrix is [E, in, out]."""
    s = Spec(config)
    H, q_out, kv_out = s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim
    inter = config["intermediate_size"]
    shapes = {"model.embed_tokens.weight": ((s.vocab, H), "embed")}

    def linear(name, out, inp, bias):
        shapes[name + ".weight"] = ((out, inp), "matrix")
        if bias:
            shapes[name + ".bias"] = ((out,), "bias")

    def gated(p, width):  # gate_proj, up_proj, down_proj of one SwiGLU MLP
        linear(p + "gate_proj", width, H, s.mlp_bias)
        linear(p + "up_proj", width, H, s.mlp_bias)
        linear(p + "down_proj", H, width, s.mlp_bias)

    for i in range(s.layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = ((H,), "norm")
        if s.family == "deepseek_v3":  # MLA
            a = p + "self_attn."
            if s.q_lora:
                linear(a + "q_a_proj", s.q_lora, H, s.qkv_bias)
                shapes[a + "q_a_layernorm.weight"] = ((s.q_lora,), "norm")
                linear(a + "q_b_proj", s.heads * (s.nope_dim + s.rope_dim), s.q_lora, False)
            else:
                linear(a + "q_proj", s.heads * (s.nope_dim + s.rope_dim), H, False)
            linear(a + "kv_a_proj_with_mqa", s.kv_lora + s.rope_dim, H, s.qkv_bias)
            shapes[a + "kv_a_layernorm.weight"] = ((s.kv_lora,), "norm")
            linear(a + "kv_b_proj", s.heads * (s.nope_dim + s.v_dim), s.kv_lora, False)
            linear(a + "o_proj", H, s.heads * s.v_dim, s.o_bias)
        elif s.family == "phi3":  # q, k, v rows in one matrix
            linear(p + "self_attn.qkv_proj", q_out + 2 * kv_out, H, False)
            linear(p + "self_attn.o_proj", H, q_out, False)
        else:
            linear(p + "self_attn.q_proj", q_out, H, s.qkv_bias)
            linear(p + "self_attn.k_proj", kv_out, H, s.qkv_bias)
            linear(p + "self_attn.v_proj", kv_out, H, s.qkv_bias)
            linear(p + "self_attn.o_proj", H, q_out, s.o_bias)
        if s.family == "gpt_oss":
            shapes[p + "self_attn.sinks"] = ((s.heads,), "sinks")
        if s.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = ((s.head_dim,), "norm")
            shapes[p + "self_attn.k_norm.weight"] = ((s.head_dim,), "norm")
        shapes[p + "post_attention_layernorm.weight"] = ((H,), "norm")
        if s.sandwich:
            shapes[p + "pre_feedforward_layernorm.weight"] = ((H,), "norm")
            shapes[p + "post_feedforward_layernorm.weight"] = ((H,), "norm")
        if s.family == "gpt_oss":
            E, e = s.experts, p + "mlp.experts."
            linear(p + "mlp.router", E, H, True)
            for name, out, inp in (("gate_up_proj", 2 * inter, H), ("down_proj", H, inter)):
                if quant_method(config) == "mxfp4":  # as OpenAI publishes them: [E, out, in / 32, 16] bytes
                    shapes[e + name + "_blocks"] = ((E, out, inp // 32, 16), "mxfp4_blocks")
                    shapes[e + name + "_scales"] = ((E, out, inp // 32), "mxfp4_scales")
                else:  # transformers' dequantized GptOssExperts: [E, in, out]
                    shapes[e + name] = ((E, inp, out), "matrix")
                shapes[e + name + "_bias"] = ((E, out), "bias")
        elif s.moe_layers[i] and s.family == "deepseek_v3":
            shapes[p + "mlp.gate.weight"] = ((s.experts, H), "matrix")
            shapes[p + "mlp.gate.e_score_correction_bias"] = ((s.experts,), "score_bias")
            for j in range(s.experts):
                gated(p + f"mlp.experts.{j}.", s.expert_inter)
            if s.shared_inter:
                gated(p + "mlp.shared_experts.", s.shared_inter)
        elif s.moe_layers[i] and s.family in ("qwen2_moe", "qwen3_moe"):
            linear(p + "mlp.gate", s.experts, H, False)
            for j in range(s.experts):
                gated(p + f"mlp.experts.{j}.", s.expert_inter)
            if s.shared_inter:
                gated(p + "mlp.shared_expert.", s.shared_inter)
                linear(p + "mlp.shared_expert_gate", 1, H, False)
        elif s.moe_layers[i]:
            linear(p + "block_sparse_moe.gate", s.experts, H, False)
            for j in range(s.experts):
                e = p + f"block_sparse_moe.experts.{j}."
                linear(e + "w1", inter, H, False)
                linear(e + "w3", inter, H, False)
                linear(e + "w2", H, inter, False)
        elif s.family == "phi3":  # gate rows, then up rows
            linear(p + "mlp.gate_up_proj", 2 * inter, H, False)
            linear(p + "mlp.down_proj", H, inter, False)
        else:
            gated(p + "mlp.", inter)
    shapes["model.norm.weight"] = ((H,), "norm")
    if not s.tied:
        shapes["lm_head.weight"] = ((s.vocab, H), "matrix")
    return shapes


FP4_RMS = math.sqrt(np.mean(E2M1 ** 2))  # of a uniformly random E2M1 code: 2.93


def random_model(config, seed):
    """Random tensors for `config`, scaled so that every activation is O(1)
    and the logits O(1-10): matrices N(0, gain/sqrt(fan_in)), embeddings
    N(0, 0.5), biases N(0, 0.2), norm weights 1 + N(0, 0.1) (gemma's stored w
    is the offset from 1, so N(0, 0.1) there), GPT-OSS's sinks N(0, 1),
    DeepSeek-V3's e_score_correction_bias N(0, 0.1). float32, except:

    - GPT-OSS with quantization_config {"quant_method": "mxfp4"}: the experts'
      blocks uniformly random bytes (two E2M1 codes each), their E8M0 scales
      127 + round(log2(1 / (sqrt(fan_in) * FP4_RMS))) + {-1, 0, 1};
    - quantization_config {"quant_method": "fp8"}: every decoder layer's
      linear weight but the router ("F8_E4M3", codes) with a float32
      `weight_scale_inv` per weight_block_size block (block max / 448)."""
    rng = np.random.default_rng(seed)
    offset = 0.0 if Spec(config).gemma_norm else 1.0
    tensors = {}
    for name, (shape, kind) in tensor_shapes(config).items():
        if kind == "embed":
            a = rng.normal(0, 0.5, shape)
        elif kind == "matrix":
            gain = 3.0 if name == "lm_head.weight" else 1.0
            a = rng.normal(0, gain / math.sqrt(shape[1]), shape)
        elif kind == "bias":
            a = rng.normal(0, 0.2, shape)
        elif kind == "sinks":
            a = rng.normal(0, 1.0, shape)
        elif kind == "score_bias":
            a = rng.normal(0, 0.1, shape)
        elif kind == "mxfp4_blocks":
            tensors[name] = rng.integers(0, 256, shape, dtype=np.uint8)
            continue
        elif kind == "mxfp4_scales":
            exponent = round(math.log2(1 / (math.sqrt(shape[-1] * 32) * FP4_RMS)))
            tensors[name] = (127 + exponent + rng.integers(-1, 2, shape)).astype(np.uint8)
            continue
        else:
            a = offset + rng.normal(0, 0.1, shape)
        tensors[name] = a.astype(np.float32)
    if quant_method(config) == "fp8":
        block = config["quantization_config"].get("weight_block_size", [128, 128])
        for name in [n for n, (shape, kind) in tensor_shapes(config).items()
                     if kind == "matrix" and n.startswith("model.layers.") and not n.endswith("mlp.gate.weight")]:
            codes, scale_inv = quantize_fp8(tensors[name], block)
            tensors[name] = ("F8_E4M3", codes)
            tensors[name + "_scale_inv"] = scale_inv
    return tensors


def quantize_fp8(weight, block):
    """(e4m3 codes, float32 scale_inv) of a float matrix: each block's scale
    its max |w| / 448, each element the nearest e4m3 value of w / scale."""
    b0, b1 = block
    rows, cols = weight.shape
    w = np.asarray(weight, np.float64)
    scale = np.zeros((-(-rows // b0), -(-cols // b1)), np.float32)
    for r in range(scale.shape[0]):
        for c in range(scale.shape[1]):
            scale[r, c] = max(np.abs(w[r * b0:(r + 1) * b0, c * b1:(c + 1) * b1]).max(), 1e-30) / 448
    x = w / np.repeat(np.repeat(scale.astype(np.float64), b0, 0), b1, 1)[:rows, :cols]
    positive = E4M3[:0x7F].astype(np.float64)  # codes 0..126: 0 to 448, increasing
    i = np.clip(np.searchsorted(positive, np.abs(x)), 1, 0x7E)
    i = np.where(np.abs(x) - positive[i - 1] <= positive[i] - np.abs(x), i - 1, i)
    return (i | np.where(x < 0, 0x80, 0)).astype(np.uint8), scale


def random_weights(config, seed):
    """The oracle's float64 weights of random_model(config, seed), decoded
    as load_model would decode them from files."""
    return oracle_weights(config, {name: _decode(*_encode(v)) for name, v in random_model(config, seed).items()})


# ------------------------------------------------------------ the forward pass


def rms_norm(x, w, eps, gemma):
    x = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * (1.0 + w) if gemma else x * w


def linear(x, weights, name):
    y = x @ weights[name + ".weight"].T
    bias = weights.get(name + ".bias")
    return y if bias is None else y + bias


def inv_frequencies(s, length, local=False):
    """(RoPE's inverse frequencies over s.rope_dim, the attention factor that
    multiplies cos and sin) for a sequence of `length` from position 0, after
    rope_scaling if any (Gemma 3's windowed layers: their own base, unscaled)."""
    d = s.rope_dim
    exponent = torch.arange(0, d, 2, dtype=DTYPE) / d
    if local:
        return s.local_theta ** -exponent, 1.0
    inv = s.theta ** -exponent
    rs = s.rope_scaling
    if not rs:
        return inv, 1.0
    kind = rs.get("rope_type", rs.get("type"))
    if s.family == "phi3" and kind in ("su", "yarn"):  # Phi3Config reads both as longrope
        kind = "longrope"
    if kind == "default":
        return inv, 1.0
    if kind == "linear":
        return inv / rs["factor"], 1.0
    if kind == "llama3":
        f = rs["factor"]
        lf, hf, L0 = rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        smooth = (L0 / wavelen - lf) / (hf - lf)
        medium = (1 - smooth) * inv / f + smooth * inv
        return torch.where(wavelen > L0 / lf, inv / f, torch.where(wavelen < L0 / hf, inv, medium)), 1.0
    if kind == "yarn":
        return yarn(s, rs, inv)
    if kind == "longrope":
        return longrope(s, rs, inv, length)
    raise ValueError(f"rope_scaling type {kind!r} not in the oracle")


def yarn(s, rs, inv):
    """YaRN (_compute_yarn_parameters on main): `factor` as given (only a
    missing one is max_position_embeddings / original); the frequencies
    blended from extrapolation (inv, below dim `low`) to interpolation (inv /
    factor, above `high`) along a linear ramp; `low` and `high` floored and
    ceiled unless truncate is false (main added `truncate`, default true;
    earlier versions always truncated); attention factor
    mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are
    set, else mscale(factor), unless attention_factor is given."""
    d, L0 = s.rope_dim, s.original_max
    factor = rs.get("factor") or s.max_positions / L0
    attention = rs.get("attention_factor")
    if attention is None:
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        attention = yarn_mscale(factor, m) / yarn_mscale(factor, m_all) if m and m_all else yarn_mscale(factor)
    # the dim whose wavelength turns `rotations` times over L0 positions
    dim_of = lambda rotations: d * math.log(L0 / (rotations * 2 * math.pi)) / (2 * math.log(s.theta))  # noqa: E731
    low, high = dim_of(rs.get("beta_fast") or 32), dim_of(rs.get("beta_slow") or 1)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=DTYPE) - low) / (high - low)).clamp(0, 1)
    return inv / factor * ramp + inv * (1 - ramp), attention


def longrope(s, rs, inv, length):
    """LongRoPE (_compute_longrope_parameters + dynamic_rope_update on main):
    the frequencies divided by long_factor when the sequence (max position + 1)
    is longer than original_max_position_embeddings, else by short_factor;
    attention factor sqrt(1 + ln(factor) / ln(original)) with factor =
    max_position_embeddings / original unless given (1 for factor <= 1),
    applied at every length."""
    L0 = s.original_max
    factor = rs.get("factor") or s.max_positions / L0
    attention = rs.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(L0))
    ext = rs["long_factor"] if length > L0 else rs["short_factor"]
    return inv / torch.tensor(ext, dtype=DTYPE), attention


def rope_tables(s, length, local=False):
    inv, attention = inv_frequencies(s, length, local)
    angle = torch.arange(length, dtype=DTYPE)[:, None] * inv[None, :]
    angle = torch.cat([angle, angle], dim=-1)  # [T, rope_dim]: freqs repeated [f, f]
    return torch.cos(angle) * attention, torch.sin(angle) * attention


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):
    """Rotate the first cos.shape[-1] dims of each head (the pairs i, i + half),
    the rest passing through (Phi-3's partial rotary)."""
    r = cos.shape[-1]
    rot = x[..., :r]
    return torch.cat([rot * cos + rotate_half(rot) * sin, x[..., r:]], dim=-1)


def attention_mask(length, window):
    """allowed[i, j]: query i sees key j (causal, optionally windowed)."""
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    allowed = j <= i
    if window is not None:
        allowed &= (i - j) < window
    return allowed


def attention(s, weights, p, x, cos, sin, window):
    n, T, _ = x.shape
    q_out, kv_out = s.heads * s.head_dim, s.kv_heads * s.head_dim
    if p + "qkv_proj.weight" in weights:  # Phi-3: q rows, then k, then v
        q, k, v = linear(x, weights, p + "qkv_proj").split([q_out, kv_out, kv_out], dim=-1)
    else:
        q, k, v = (linear(x, weights, p + name) for name in ("q_proj", "k_proj", "v_proj"))
    q = q.reshape(n, T, s.heads, s.head_dim).transpose(1, 2)
    k = k.reshape(n, T, s.kv_heads, s.head_dim).transpose(1, 2)
    v = v.reshape(n, T, s.kv_heads, s.head_dim).transpose(1, 2)
    if s.qk_norm:  # per head, before RoPE (Gemma 3's with 1 + w)
        q = rms_norm(q, weights[p + "q_norm.weight"], s.eps, s.gemma_norm)
        k = rms_norm(k, weights[p + "k_norm.weight"], s.eps, s.gemma_norm)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    # GQA: query head h reads kv head h // group; repeat_interleave lays the
    # kv heads out as [0]*group + [1]*group + ...
    group = s.heads // s.kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * s.scaling
    if s.attn_softcap is not None:
        scores = s.attn_softcap * torch.tanh(scores / s.attn_softcap)
    scores = scores.masked_fill(~attention_mask(T, window), float("-inf"))
    out = softmax_with_sinks(scores, weights.get(p + "sinks")) @ v  # [n, heads, T, d]
    out = out.transpose(1, 2).reshape(n, T, s.heads * s.head_dim)
    return linear(out, weights, p + "o_proj")


def softmax_with_sinks(scores, sinks):
    """softmax over the keys; with GPT-OSS's sinks, each head's sink logit
    joins every row's softmax (a denominator term) and is then dropped."""
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    sink = sinks.view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]


def mla_attention(s, weights, p, x, cos, sin):
    """DeepSeek-V3's multi-head latent attention. Queries: x -> q_proj, or
    q_a_proj -> q_a_layernorm -> q_b_proj; per head [nope | rope] dims. Keys
    and values: x -> kv_a_proj_with_mqa = [latent (kv_lora_rank) | k_rope
    (one head, shared)], latent -> kv_a_layernorm -> kv_b_proj = per head
    [k_nope | v]. The two latent norms use RMSNorm's default eps 1e-6, not
    rms_norm_eps (DeepseekV3RMSNorm(q_lora_rank), as transformers builds them)."""
    n, T, _ = x.shape
    H, nope, rope = s.heads, s.nope_dim, s.rope_dim
    if s.q_lora:
        q = linear(x, weights, p + "q_a_proj")
        q = linear(rms_norm(q, weights[p + "q_a_layernorm.weight"], 1e-6, False), weights, p + "q_b_proj")
    else:
        q = linear(x, weights, p + "q_proj")
    q_nope, q_rot = q.reshape(n, T, H, nope + rope).transpose(1, 2).split([nope, rope], dim=-1)
    latent, k_rot = linear(x, weights, p + "kv_a_proj_with_mqa").split([s.kv_lora, rope], dim=-1)
    latent = rms_norm(latent, weights[p + "kv_a_layernorm.weight"], 1e-6, False)
    k_rot = k_rot[:, None]  # [n, 1, T, rope]: one rope key for all heads
    if s.rope_interleave:  # apply_rotary_pos_emb_interleave: dims [0, 2, 4, ..., 1, 3, 5, ...] first
        q_rot = torch.cat([q_rot[..., 0::2], q_rot[..., 1::2]], dim=-1)
        k_rot = torch.cat([k_rot[..., 0::2], k_rot[..., 1::2]], dim=-1)
    k_rot = apply_rope(k_rot, cos, sin)
    if s.kv_store is not None:  # the cache as vLLM and llama.cpp keep it: latent and rotated key
        latent, k_rot = s.kv_store(latent), s.kv_store(k_rot)
    kv = linear(latent, weights, p + "kv_b_proj")
    k_nope, v = kv.reshape(n, T, H, nope + s.v_dim).transpose(1, 2).split([nope, s.v_dim], dim=-1)
    q = torch.cat([q_nope, apply_rope(q_rot, cos, sin)], dim=-1)
    k = torch.cat([k_nope, k_rot.expand(n, H, T, rope)], dim=-1)
    if s.kv_heads_store is not None:  # the cache as transformers keeps it: each head's k and v
        k, v = s.kv_heads_store(k), s.kv_heads_store(v)
    scores = (q @ k.transpose(-1, -2)) * s.scaling
    scores = scores.masked_fill(~attention_mask(T, None), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # [n, H, T, v_dim]
    return linear(out.transpose(1, 2).reshape(n, T, H * s.v_dim), weights, p + "o_proj")


def activation(s, x):
    if s.gelu:  # GELU, tanh approximation
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))
    return x * torch.sigmoid(x)  # silu


def mlp(s, weights, p, x):
    if p + "gate_up_proj.weight" in weights:  # Phi-3: gate rows, then up rows
        gate, up = linear(x, weights, p + "gate_up_proj").chunk(2, dim=-1)
    else:
        gate, up = linear(x, weights, p + "gate_proj"), linear(x, weights, p + "up_proj")
    return linear(activation(s, gate) * up, weights, p + "down_proj")


def descending(x, k):
    """The indices of the k largest along the last dim, ties to the lower
    index (a stable descending sort)."""
    return torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :k]


def moe(s, weights, p, x, routes=None):
    """Mixtral and Qwen3-MoE: softmax router over all experts, the top-k
    (ties to the lower index: a stable descending sort), their weights
    renormalized (Mixtral; Qwen3-MoE when norm_topk_prob) or not."""
    probs = torch.softmax(linear(x, weights, p + "gate"), dim=-1)  # [n, T, E]
    top = descending(probs, s.top_k)
    if routes is not None:  # the experts each token takes, by descending weight
        routes.append(top)
    chosen = probs.gather(-1, top)
    if s.renormalize:
        chosen = chosen / chosen.sum(-1, keepdim=True)
    dense = torch.zeros_like(probs).scatter(-1, top, chosen)
    names = ("w1", "w3", "w2") if s.family == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    out = torch.zeros_like(x)
    for j in range(s.experts):
        e = p + f"experts.{j}."
        h = activation(s, linear(x, weights, e + names[0])) * linear(x, weights, e + names[1])
        out = out + dense[..., j:j + 1] * linear(h, weights, e + names[2])
    if s.shared_inter:  # Qwen2-MoE: every token's shared expert, gated by a sigmoid
        gate = torch.sigmoid(linear(x, weights, p + "shared_expert_gate"))
        out = out + gate * mlp(s, weights, p + "shared_expert.", x)
    return out


def gpt_oss_moe(s, weights, p, x, routes=None):
    """GPT-OSS: router logits = x W^T + b, the top-k logits (ties to the
    lower index) softmaxed among themselves. Expert j (transformers' layout,
    W [in, out]): gate_up = x W1[j] + b1[j], gate = its even columns, up the
    odd ones; gate clamped above at swiglu_limit, up to +-swiglu_limit;
    out = ((up + 1) * gate * sigmoid(swiglu_alpha * gate)) W2[j] + b2[j]."""
    logits = linear(x, weights, p + "router")  # [n, T, E]
    top = descending(logits, s.top_k)
    if routes is not None:  # by descending weight
        routes.append(top)
    dense = torch.zeros_like(logits).scatter(-1, top, torch.softmax(logits.gather(-1, top), dim=-1))
    e = p + "experts."
    limit = s.swiglu_limit
    out = torch.zeros_like(x)
    for j in range(s.experts):
        gate_up = x @ weights[e + "gate_up_proj"][j] + weights[e + "gate_up_proj_bias"][j]
        gate, up = gate_up[..., 0::2].clamp(max=limit), gate_up[..., 1::2].clamp(-limit, limit)
        h = (up + 1) * gate * torch.sigmoid(s.swiglu_alpha * gate)
        out = out + dense[..., j:j + 1] * (h @ weights[e + "down_proj"][j] + weights[e + "down_proj_bias"][j])
    return out


def deepseek_moe(s, weights, p, x, routes=None):
    """DeepSeek-V3 (DeepseekV3TopkRouter): scores = sigmoid(x W^T); the choice
    uses scores + e_score_correction_bias: per group of E / n_group
    consecutive experts the sum of its top-2 choice scores, the topk_group
    best groups kept, the others' choice scores set to 0.0 (masked_fill, not
    -inf: a negative kept score loses to them), the top-k of that (ties to the
    lower index). Weights: the chosen experts' unbiased scores, divided by
    their sum + 1e-20 when norm_topk_prob, times routed_scaling_factor. Plus
    the shared experts, every token. n_group 1 (Kimi K2): one group, kept."""
    scores = torch.sigmoid(linear(x, weights, p + "gate"))  # [n, T, E]
    choice = scores + weights[p + "gate.e_score_correction_bias"]
    grouped = choice.reshape(*choice.shape[:-1], s.n_group, s.experts // s.n_group)
    group_scores = grouped.topk(2, dim=-1).values.sum(-1)  # [n, T, n_group]
    keep = torch.zeros_like(group_scores).scatter(-1, descending(group_scores, s.topk_group), 1.0)
    keep = keep.bool()[..., None].expand_as(grouped).reshape(choice.shape)
    top = descending(choice.masked_fill(~keep, 0.0), s.top_k)
    if routes is not None:  # by descending (biased, masked) choice score
        routes.append(top)
    chosen = scores.gather(-1, top)
    if s.renormalize:
        chosen = chosen / (chosen.sum(-1, keepdim=True) + 1e-20)
    dense = torch.zeros_like(scores).scatter(-1, top, chosen * s.routed_scaling)
    out = torch.zeros_like(x)
    for j in range(s.experts):
        out = out + dense[..., j:j + 1] * mlp(s, weights, p + f"experts.{j}.", x)
    if s.shared_inter:
        out = out + mlp(s, weights, p + "shared_experts.", x)
    return out


def forward(config, weights, tokens, routes=None, kv_store=None, kv_heads_store=None):
    """float64 logits [n, T, vocab] of int tokens [n, T] (or [T, vocab] of
    [T]); every sequence starts at position 0. `routes`, a dict, gets each
    layer with experts' top-k experts per token ([n, T, k]). `kv_store`, an
    elementwise function, gives what a KV cache stores of its values (only
    multi-head latent attention's latent cache, so far; `kv_heads_store` its
    heads' keys and values instead)."""
    s = Spec(config)
    s.kv_store, s.kv_heads_store = kv_store, kv_heads_store
    tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    single = tokens.dim() == 1
    if single:
        tokens = tokens[None]
    norm = lambda x, name: rms_norm(x, weights[name], s.eps, s.gemma_norm)  # noqa: E731
    embed = weights["model.embed_tokens.weight"]
    x = embed[tokens]
    if s.embed_scale:
        x = x * math.sqrt(s.hidden)
    tables = {False: rope_tables(s, tokens.shape[1])}
    if s.local_theta is not None:
        tables[True] = rope_tables(s, tokens.shape[1], local=True)
    for i in range(s.layers):
        p = f"model.layers.{i}."
        cos, sin = tables[s.local_theta is not None and s.windows[i] is not None]
        h = norm(x, p + "input_layernorm.weight")
        if s.family == "deepseek_v3":
            a = mla_attention(s, weights, p + "self_attn.", h, cos, sin)
        else:
            a = attention(s, weights, p + "self_attn.", h, cos, sin, s.windows[i])
        if s.sandwich:
            a = norm(a, p + "post_attention_layernorm.weight")
        x = x + a
        pre = p + ("pre_feedforward_layernorm.weight" if s.sandwich else "post_attention_layernorm.weight")
        h = norm(x, pre)
        if not s.moe_layers[i]:
            m = mlp(s, weights, p + "mlp.", h)
        else:
            taken = []
            if s.family == "gpt_oss":
                m = gpt_oss_moe(s, weights, p + "mlp.", h, taken)
            elif s.family == "deepseek_v3":
                m = deepseek_moe(s, weights, p + "mlp.", h, taken)
            else:
                m = moe(s, weights, p + ("block_sparse_moe." if s.family == "mixtral" else "mlp."), h, taken)
            if routes is not None:
                routes[i] = taken[0]
        if s.sandwich:
            m = norm(m, p + "post_feedforward_layernorm.weight")
        x = x + m
    x = norm(x, "model.norm.weight")
    logits = x @ (embed if s.tied else weights["lm_head.weight"]).T
    if s.final_softcap is not None:
        logits = s.final_softcap * torch.tanh(logits / s.final_softcap)
    return logits[0] if single else logits


def greedy(config, weights, length, bos=None):
    """`length` tokens: bos, then each next token the argmax (lowest id on
    ties) of the logits at the last position, recomputed from scratch."""
    tokens = [config.get("bos_token_id", 1) if bos is None else bos]
    while len(tokens) < length:
        last = forward(config, weights, tokens)[-1].numpy()
        tokens.append(int(np.argmax(last)))  # np.argmax: first maximum
    return np.array(tokens, dtype=np.int64)


def relative_error(ours, reference):
    """max over positions of max|ours - ref| / max|ref| at that position."""
    ref = np.asarray(reference, dtype=np.float64)
    ref = ref.reshape(-1, ref.shape[-1])
    diff = np.abs(np.asarray(ours, dtype=np.float64).reshape(ref.shape) - ref)
    return float((diff.max(-1) / np.abs(ref).max(-1)).max())


# ------------------------------------------------------------ llama2.c's tokenizer


def load_llama2c_vocab(path, vocab_size=512):
    """The pieces of a llama2.c tokenizer file: int32 max_token_length, then
    per token a float32 score, an int32 length and the bytes."""
    with open(path, "rb") as f:
        data = f.read()
    pos, pieces = 4, []
    for _ in range(vocab_size):
        (length,) = struct.unpack_from("<i", data, pos + 4)
        pieces.append(data[pos + 8:pos + 8 + length])
        pos += 8 + length
    return pieces


_BYTE_PIECE = re.compile(rb"<0x([0-9A-Fa-f]{1,2})")  # sscanf "<0x%02hhX>"
_C_PRINTABLE = set(range(0x20, 0x7F)) | set(b" \t\n\v\f\r")  # isprint || isspace


def llama2c_decode(pieces, prev, token):
    """run.c's decode(): after BOS a leading space is stripped; <0xXX> is
    that raw byte. Then safe_printf(): a lone non-printable byte prints
    nothing, and printf's %s stops at a NUL."""
    piece = pieces[token]
    if prev == 1 and piece.startswith(b" "):
        piece = piece[1:]
    match = _BYTE_PIECE.match(piece)
    if match:
        piece = bytes([int(match.group(1), 16)])
    piece = piece.split(b"\0")[0]
    if len(piece) == 1 and piece[0] not in _C_PRINTABLE:
        return b""
    return piece


def llama2c_output(pieces, tokens, steps):
    """What run.c's generate() prints for an empty prompt (prompt tokens =
    [BOS]) with `steps`, given the token sequence its sampler would produce
    (tokens[0] = BOS, tokens[pos + 1] sampled at pos): positions 0..steps-1
    are forwarded, each printing the token sampled there (so up to `steps`
    pieces, needing steps + 1 tokens), and a sampled BOS ends the loop
    unprinted. The trailing newline run.c adds afterwards is left out."""
    out, token = b"", tokens[0]
    for pos in range(steps):
        nxt = int(tokens[pos + 1])
        if nxt == 1:
            break
        out += llama2c_decode(pieces, token, nxt)
        token = nxt
    return out
