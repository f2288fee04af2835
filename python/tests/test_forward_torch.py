"""`lowp.forward` and `lowp.sample` against an independent float64 PyTorch
oracle (torch_reference.py, written from the architectures' formulas), on
small random models of every supported family and on the bundled real model
stories260K-hf, whose greedy story must be llama2.c's expected output.

Torch is an oracle only: without it these tests skip, unless
LOWP_REQUIRE_TORCH=1 (then a missing torch is an error).
"""

import functools
import json
import math
import os

import numpy as np
import pytest

if os.environ.get("LOWP_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch")

import lowp  # noqa: E402
import torch_reference as ref  # noqa: E402

torch.set_num_threads(2)

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
STORIES = os.path.join(DATA, "stories260K-hf")
TOKENIZER = os.path.join(DATA, "stories260K", "tok512.bin")

# float32 against float64: per position, the largest logit error relative to
# the largest |logit| there. float32 rounding gives ~1e-6; a wrong formula
# gives 1e-2 or more.
TOLERANCE = 1e-4

# llama2.c's test_all.py `expected_stdout` (karpathy/llama2.c, commit
# 350e04fe35433e6d2941dce5a1f53308f87058eb, test_all.py): what
# `./run stories260K.bin -z tok512.bin -t 0.0 -n 200` prints, its trailing
# newline stripped.
LLAMA2C_STEPS = 200
LLAMA2C_EXPECTED = (
    b"Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    b"One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
    b"Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
    b"She said, \"I want to play with your ball, but I can't find it.\"\n"
    b"Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what to do.\"\n"
    b"Lily didn't want to help her mom, so she"
)


def check_close(ours, reference, label):
    """Assert the relative error bound, printing the measured number."""
    err = ref.relative_error(ours, reference)
    print(f"\n{label}: max relative logit error {err:.3g}")
    assert err <= TOLERANCE, f"{label}: max relative logit error {err:.3g} > {TOLERANCE:g}"
    return err


# ------------------------------------------------------------ random models


def config(model_type, architecture, **fields):
    """A small config.json: 4 heads, 2 kv heads, vocab 101 (odd on purpose),
    every setting the oracle reads written out (no family defaults relied on
    unless a case leaves a field out on purpose)."""
    base = {
        "architectures": [architecture], "model_type": model_type,
        "vocab_size": 101, "hidden_size": 48, "intermediate_size": 88,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
        "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
        "hidden_act": "silu", "torch_dtype": "float32",
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}  # `...`: leave the field out


GELU = {"hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh"}

CASES = {
    # head_dim absent: hidden / heads = 12
    "llama": config("llama", "LlamaForCausalLM", attention_bias=False, mlp_bias=False, rope_scaling=None),
    "llama_biases_llama3_rope": config(
        "llama", "LlamaForCausalLM", hidden_size=64, head_dim=16, attention_bias=True, mlp_bias=True,
        rope_theta=500000.0,
        # L0 = 64 puts head_dim 16's wavelengths in all three bands (< 16, 16..64, > 64)
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
    # the older spelling "type"
    "llama_linear_rope": config("llama", "LlamaForCausalLM", head_dim=8,
                                rope_scaling={"type": "linear", "factor": 4.0}),
    "llama_tied": config("llama", "LlamaForCausalLM", tie_word_embeddings=True),
    "mistral_window": config("mistral", "MistralForCausalLM", num_hidden_layers=3, head_dim=16,
                             rope_theta=1000000.0, sliding_window=8),
    # sliding_window set but use_sliding_window false: no window anywhere
    "qwen2": config("qwen2", "Qwen2ForCausalLM", rms_norm_eps=1e-6, use_sliding_window=False,
                    sliding_window=8, max_window_layers=1),
    # layers 1 and 2 windowed, layer 0 not
    "qwen2_window": config("qwen2", "Qwen2ForCausalLM", num_hidden_layers=3, use_sliding_window=True,
                           sliding_window=8, max_window_layers=1),
    # heads * head_dim = 64 != hidden 48
    "qwen3": config("qwen3", "Qwen3ForCausalLM", head_dim=16, rope_theta=1000000.0,
                    attention_bias=False, use_sliding_window=False, sliding_window=None),
    # tie_word_embeddings left out: gemma's default is tied (the file has no lm_head)
    "gemma": config("gemma", "GemmaForCausalLM", head_dim=16, rms_norm_eps=1e-6,
                    tie_word_embeddings=..., **GELU),
    # softcaps small enough to bend the scores and the logits
    "gemma2_softcap_window": config(
        "gemma2", "Gemma2ForCausalLM", num_hidden_layers=3, head_dim=16, rms_norm_eps=1e-6,
        tie_word_embeddings=True, query_pre_attn_scalar=24, attn_logit_softcapping=4.0,
        final_logit_softcapping=10.0, sliding_window=8, **GELU),
    # 5 layers, every 3rd global (layers 2): two RoPE bases, the global one
    # linearly scaled; QK-norm with 1 + w; a window of 8 on 24 tokens
    "gemma3_pattern": config(
        "gemma3_text", "Gemma3ForCausalLM", num_hidden_layers=5, head_dim=16, rms_norm_eps=1e-6,
        query_pre_attn_scalar=24, sliding_window=8, sliding_window_pattern=3,
        rope_theta=1000000.0, rope_local_base_freq=100.0,
        rope_scaling={"rope_type": "linear", "factor": 4.0}, tie_word_embeddings=..., **GELU),
    # layer_types instead of the pattern, softcaps as Gemma 2's
    "gemma3_layer_types": config(
        "gemma3_text", "Gemma3ForCausalLM", num_hidden_layers=3, head_dim=16, rms_norm_eps=1e-6,
        sliding_window=6, layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        attn_logit_softcapping=4.0, final_logit_softcapping=10.0, tie_word_embeddings=False, **GELU),
    "mixtral_4x2": config("mixtral", "MixtralForCausalLM", hidden_size=32, intermediate_size=40, head_dim=8,
                          num_local_experts=4, num_experts_per_tok=2, sliding_window=16),
    # 8 experts of 24, top 3 not renormalized (Qwen3MoeConfig's default); layer 1
    # dense (mlp_only_layers), layer 2 windowed: QK-norm, routing and window together
    "qwen3_moe": config("qwen3_moe", "Qwen3MoeForCausalLM", num_hidden_layers=3, head_dim=16,
                        rope_theta=1000000.0, attention_bias=False, num_experts=8,
                        num_experts_per_tok=3, moe_intermediate_size=24, norm_topk_prob=False,
                        decoder_sparse_step=1, mlp_only_layers=[1], use_sliding_window=True,
                        sliding_window=8, max_window_layers=2),
    # Qwen1.5-MoE's layout: biases on q, k, v, a shared expert gated by a sigmoid
    "qwen2_moe_shared": config("qwen2_moe", "Qwen2MoeForCausalLM", num_experts=6, num_experts_per_tok=2,
                               moe_intermediate_size=20, shared_expert_intermediate_size=56,
                               norm_topk_prob=False, use_sliding_window=False),
    "qwen3_moe_renormalized": config("qwen3_moe", "Qwen3MoeForCausalLM", head_dim=16,
                                     num_experts=6, num_experts_per_tok=2, moe_intermediate_size=20,
                                     norm_topk_prob=True, decoder_sparse_step=2),
    # GPT-OSS as OpenAI publishes it: experts in MXFP4 (U8 blocks [E, out, in/32, 16], E8M0
    # scales), sinks, layers 0 and 2 windowed, YaRN with truncate false over a short
    # original length (the ramp mid-head), swiglu_limit 1 so that the clamps bite
    "gpt_oss_mxfp4": config(
        "gpt_oss", "GptOssForCausalLM", hidden_size=64, intermediate_size=64, head_dim=16,
        num_hidden_layers=3, num_local_experts=4, num_experts_per_tok=2, attention_bias=True,
        sliding_window=8, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        swiglu_limit=1.0, max_position_embeddings=256,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                      "truncate": False, "original_max_position_embeddings": 64},
        quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}),
    # transformers' dequantized save (float experts [E, in, out]); layer_types left out (the
    # even layers windowed), swiglu_limit left out (7), truncate left out (true), 6 experts top 3
    "gpt_oss_dense": config(
        "gpt_oss", "GptOssForCausalLM", hidden_size=64, intermediate_size=32, head_dim=16,
        num_hidden_layers=3, num_local_experts=6, num_experts_per_tok=3, sliding_window=8,
        max_position_embeddings=256,
        rope_scaling={"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
                      "original_max_position_embeddings": 32}),
    # MLA with q_lora_rank, interleaved rope dims, YaRN whose mscale_all_dim scales the
    # softmax (and mscale / mscale_all_dim the cos and sin); v_head_dim != qk dims; layer
    # 0 dense, 1-2 MoE: 2 groups of 4 experts, 1 group kept, top 2, a shared expert
    "deepseek_v3_q_lora": config(
        "deepseek_v3", "DeepseekV3ForCausalLM", hidden_size=64, intermediate_size=96,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-6,
        q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
        n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, moe_intermediate_size=24,
        n_shared_experts=1, routed_scaling_factor=2.5, norm_topk_prob=True, first_k_dense_replace=1,
        rope_interleave=True, attention_bias=False, max_position_embeddings=256,
        rope_scaling={"type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                      "mscale_all_dim": 0.707, "original_max_position_embeddings": 64}),
    # Kimi K2's shape: q_proj (q_lora_rank null), one expert group, and DeepSeek's FP8
    # layout: every decoder linear weight but the router F8_E4M3 with a float32
    # weight_scale_inv per 16 x 16 block (partial blocks: 24, 40, 72 rows/cols)
    "deepseek_v3_fp8": config(
        "deepseek_v3", "DeepseekV3ForCausalLM", hidden_size=64, intermediate_size=72,
        num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-6, q_lora_rank=None,
        kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16,
        n_routed_experts=6, num_experts_per_tok=2, n_group=1, topk_group=1, moe_intermediate_size=24,
        n_shared_experts=2, routed_scaling_factor=1.5, norm_topk_prob=False, first_k_dense_replace=1,
        rope_scaling=None,
        quantization_config={"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                             "weight_block_size": [16, 16]}),
    # fused qkv_proj and gate_up_proj; Phi-3-mini-4k's sliding window (on every layer)
    "phi3": config("phi3", "Phi3ForCausalLM", hidden_size=64, sliding_window=8, rope_scaling=None),
    # Phi-4-mini's shape: 3/4 of each head rotated, LongRoPE; 24 tokens <= the original
    # 32 so the short factors, with attention factor sqrt(1 + ln(256/32) / ln 32); tied
    "phi3_longrope_partial": config(
        "phi3", "Phi3ForCausalLM", hidden_size=64, partial_rotary_factor=0.75,
        max_position_embeddings=256, original_max_position_embeddings=32, tie_word_embeddings=True,
        rope_scaling={"type": "longrope", "short_factor": [1.0, 1.25, 1.5, 2.0, 3.0, 5.0],
                      "long_factor": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]}),
    # 24 tokens > the original 16: the long factors for the whole sequence
    # (transformers' dynamic update), in the oracle and in lowp
    "phi3_longrope_long": config(
        "phi3", "Phi3ForCausalLM", hidden_size=64, partial_rotary_factor=0.75,
        max_position_embeddings=256, original_max_position_embeddings=16,
        rope_scaling={"type": "longrope", "short_factor": [1.0, 1.25, 1.5, 2.0, 3.0, 5.0],
                      "long_factor": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]}),
}


def make_model(tmp_path, name, shards=1):
    """The case's config.json and random weights (random_model: the
    quantized layouts follow the config's quantization_config)."""
    cfg = CASES[name]
    seed = list(CASES).index(name)
    tensors = ref.random_model(cfg, seed)
    ref.save_model(tmp_path, cfg, tensors, shards=shards)
    return cfg, seed


@pytest.mark.parametrize("name", list(CASES))
def test_random_model_matches_oracle(tmp_path, name):
    cfg, seed = make_model(tmp_path, name)
    rng = np.random.default_rng(100 + seed)
    # int32 and int64 inputs alternate over the cases
    tokens = rng.integers(0, cfg["vocab_size"], size=(2, 24)).astype(np.int32 if seed % 2 else np.int64)
    ours = lowp.forward(tmp_path, tokens)  # os.PathLike
    assert ours.dtype == np.float32 and ours.shape == (2, tokens.shape[1], cfg["vocab_size"])
    theirs = ref.forward(*ref.load_model(tmp_path), tokens)
    # the logits are O(1-10): a test on a degenerate (all ~0) model would prove little
    assert 1.0 < float(theirs.abs().max()) < 100.0
    check_close(ours, theirs.numpy(), name)


def _weights_off(suffix, value):
    """A weights-level switch: every tensor named ...suffix filled with value."""
    return lambda name, w: torch.full_like(w, value) if name.endswith(suffix) else w


WEIGHTS = "__weights__"  # in a FEATURE_OFF entry: (name, tensor) -> tensor, applied to every weight
_YARN_OSS = CASES["gpt_oss_mxfp4"]["rope_scaling"]
_YARN_DS = CASES["deepseek_v3_q_lora"]["rope_scaling"]
_LONGROPE = CASES["phi3_longrope_partial"]["rope_scaling"]

# Each case's distinguishing setting switched off (same weights): the oracle's
# logits must move by far more than TOLERANCE, or the case would not test it.
FEATURE_OFF = {
    "llama_biases_llama3_rope": {"rope_scaling": None},
    "llama_linear_rope": {"rope_scaling": None},
    "mistral_window": {"sliding_window": None},
    "qwen2": {"use_sliding_window": True},  # the ignored window would have mattered
    "qwen2_window": {"use_sliding_window": False},
    "gemma2_softcap_window:attn": {"attn_logit_softcapping": None},
    "gemma2_softcap_window:final": {"final_logit_softcapping": None},
    "gemma2_softcap_window:window": {"sliding_window": None},
    "mixtral_4x2": {"num_experts_per_tok": 4},
    "gemma3_pattern:local_base": {"rope_local_base_freq": 1000000.0},
    "gemma3_pattern:scaling": {"rope_scaling": None},
    "gemma3_pattern:window": {"sliding_window_pattern": 1},
    "gemma3_layer_types:types": {"layer_types": ["full_attention"] * 3},
    "qwen3_moe:norm": {"norm_topk_prob": True},
    "qwen3_moe:window": {"use_sliding_window": False},
    "qwen3_moe_renormalized:norm": {"norm_topk_prob": False},
    "qwen2_moe_shared:norm": {"norm_topk_prob": True},
    "qwen2_moe_shared:shared": {"shared_expert_intermediate_size": 0},
    "qwen3_moe_renormalized:top_k": {"num_experts_per_tok": 6},
    "gpt_oss_mxfp4:sinks": {WEIGHTS: _weights_off(".self_attn.sinks", float("-inf"))},  # -inf: no sink
    "gpt_oss_mxfp4:window": {"layer_types": ["full_attention"] * 3},
    "gpt_oss_mxfp4:yarn": {"rope_scaling": {"rope_type": "default"}},  # null would mean GPT_OSS_YARN
    "gpt_oss_mxfp4:yarn_attention_factor": {"rope_scaling": {**_YARN_OSS, "attention_factor": 1.0}},
    "gpt_oss_mxfp4:truncate": {"rope_scaling": {**_YARN_OSS, "truncate": True}},
    "gpt_oss_mxfp4:swiglu_limit": {"swiglu_limit": 1e9},
    "gpt_oss_mxfp4:router_bias": {WEIGHTS: _weights_off(".mlp.router.bias", 0.0)},
    "gpt_oss_dense:window": {"sliding_window": None},
    "gpt_oss_dense:top_k": {"num_experts_per_tok": 2},
    "deepseek_v3_q_lora:yarn": {"rope_scaling": None},
    "deepseek_v3_q_lora:mscale_all_dim": {"rope_scaling": {k: v for k, v in _YARN_DS.items() if k != "mscale_all_dim"}},
    "deepseek_v3_q_lora:interleave": {"rope_interleave": False},
    "deepseek_v3_q_lora:score_bias": {WEIGHTS: _weights_off(".mlp.gate.e_score_correction_bias", 0.0)},
    "deepseek_v3_q_lora:group_limit": {"topk_group": 2},  # = n_group: no group left out
    "deepseek_v3_q_lora:routed_scaling": {"routed_scaling_factor": 1.0},
    "deepseek_v3_q_lora:norm": {"norm_topk_prob": False},
    "deepseek_v3_q_lora:shared": {"n_shared_experts": 0},
    "deepseek_v3_fp8:routed_scaling": {"routed_scaling_factor": 1.0},
    "deepseek_v3_fp8:score_bias": {WEIGHTS: _weights_off(".mlp.gate.e_score_correction_bias", 0.0)},
    "deepseek_v3_fp8:interleave": {"rope_interleave": False},  # the default (true) left out
    "phi3:window": {"sliding_window": None},
    "phi3_longrope_partial:longrope": {"rope_scaling": None},
    "phi3_longrope_partial:attention_factor": {"rope_scaling": {**_LONGROPE, "attention_factor": 1.0}},
    "phi3_longrope_partial:short_factor": {"rope_scaling": {**_LONGROPE, "short_factor": [1.0] * 6}},
    # all dims rotated instead (the factor lists then need 8 entries)
    "phi3_longrope_partial:partial": {"partial_rotary_factor": 1.0, "rope_scaling": {
        **_LONGROPE, "short_factor": _LONGROPE["short_factor"] + [8.0, 13.0], "long_factor": [1.0] * 8}},
    "phi3_longrope_long:long_factor": {"rope_scaling": {**_LONGROPE, "long_factor": _LONGROPE["short_factor"]}},
}


@pytest.mark.parametrize("key", list(FEATURE_OFF))
def test_oracle_case_exercises_its_feature(key):
    """No lowp: the oracle alone, on the case's random weights."""
    name = key.split(":")[0]
    cfg = CASES[name]
    weights = ref.random_weights(cfg, list(CASES).index(name))
    tokens = np.random.default_rng(0).integers(0, cfg["vocab_size"], size=(2, 24))
    on = ref.forward(cfg, weights, tokens).numpy()
    changes = dict(FEATURE_OFF[key])
    edit = changes.pop(WEIGHTS, lambda name, w: w)
    off = ref.forward({**cfg, **changes}, {k: edit(k, w) for k, w in weights.items()}, tokens).numpy()
    err = ref.relative_error(off, on)
    print(f"\n{key}: relative logit change {err:.3g}")
    assert err > 100 * TOLERANCE, f"{key}: {FEATURE_OFF[key]} moves the logits only {err:.3g}"


def _saved(tmp_path, label, cfg, tensors):
    ref.save_model(tmp_path / label, cfg, tensors)
    return ref.load_model(tmp_path / label)


def test_oracle_reads_e4m3_mxfp4_and_bf16_bytes(tmp_path):
    """No lowp: the safetensors writer and reader on known codes: e4m3fn (bias
    7, subnormals, NaN at S.1111.111), MXFP4 (low nibble the even element,
    E8M0 scale 2^(s - 127)), BF16 written rounding to nearest even."""
    e4m3 = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6, 0x38: 1.0, 0x3C: 1.5,
            0x7E: 448.0, 0xB8: -1.0, 0xFE: -448.0}
    codes = np.array(list(e4m3) + [0x7F, 0xFF, 0x80], dtype=np.uint8)
    blocks = np.zeros((1, 2, 1, 16), np.uint8)
    blocks[0, 0, 0, :3] = [0x21, 0xF7, 0x98]  # elements 0..5: 0.5, 1, 6, -6, -0, -0.5
    blocks[0, 1, 0, 15] = 0x20  # element 30: 0, element 31: 1
    scales = np.array([[[127], [124]]], np.uint8)  # row 0 times 1, row 1 times 1/8
    bf16 = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -7 + 2 ** -9], np.float32)
    path = tmp_path / "t.safetensors"
    ref.write_safetensors(path, {"f8": ("F8_E4M3", codes), "blocks": blocks, "scales": scales, "bf": ("BF16", bf16)})
    read = ref.read_safetensors(path)
    np.testing.assert_array_equal(read["f8"][:len(e4m3)], np.array(list(e4m3.values()), np.float32))
    assert np.isnan(read["f8"][-3]) and np.isnan(read["f8"][-2])
    assert read["f8"][-1] == 0 and np.signbit(read["f8"][-1])
    assert read["blocks"].dtype == read["scales"].dtype == np.uint8
    values = ref.decode_mxfp4(read["blocks"], read["scales"])
    assert values.shape == (1, 2, 32)
    np.testing.assert_array_equal(values[0, 0, :6], [0.5, 1.0, 6.0, -6.0, 0.0, -0.5])
    np.testing.assert_array_equal(values[0, 1, 30:], [0.0, 0.125])
    np.testing.assert_array_equal(read["bf"], [1.0, 1.0, 1 + 2 ** -6, 1 + 2 ** -7])


def test_oracle_mxfp4_layout_is_its_dense_layout(tmp_path):
    """No lowp: GPT-OSS as published (MXFP4 blocks [E, out, in/32, 16]) and
    as transformers saves it dequantized (float [E, in, out]) are the same
    model when the dense tensors are the decoded blocks: the same logits."""
    cfg = CASES["gpt_oss_mxfp4"]
    tensors = ref.random_model(cfg, 0)
    assert tensors["model.layers.0.mlp.experts.gate_up_proj_blocks"].shape == (4, 128, 2, 16)
    assert tensors["model.layers.0.mlp.experts.down_proj_scales"].shape == (4, 64, 2)
    _, quantized = _saved(tmp_path, "mxfp4", cfg, tensors)
    dense_cfg = {k: v for k, v in cfg.items() if k != "quantization_config"}
    dense = {name: quantized[name].numpy().astype(np.float32) for name in ref.tensor_shapes(dense_cfg)}
    assert dense["model.layers.0.mlp.experts.gate_up_proj"].shape == (4, 64, 128)  # [E, in, out]
    # the dense layout's column j of expert e is the published row j
    e, j = 1, 5
    row = ref.decode_mxfp4(tensors["model.layers.0.mlp.experts.gate_up_proj_blocks"][e, j],
                           tensors["model.layers.0.mlp.experts.gate_up_proj_scales"][e, j])
    np.testing.assert_array_equal(dense["model.layers.0.mlp.experts.gate_up_proj"][e, :, j], row)
    _, unpacked = _saved(tmp_path, "dense", dense_cfg, dense)
    tokens = np.random.default_rng(1).integers(0, cfg["vocab_size"], size=(2, 24))
    a, b = ref.forward(cfg, quantized, tokens), ref.forward(dense_cfg, unpacked, tokens)
    assert float(a.abs().max()) > 1 and torch.equal(a, b)


def test_oracle_fp8_layout_is_its_dequantized_weights(tmp_path):
    """No lowp: DeepSeek's FP8 layout (F8_E4M3 weights, float32
    weight_scale_inv per 16 x 16 block, partial at the edges) is the float
    model of weight * scale_inv, within float32 rounding."""
    cfg = CASES["deepseek_v3_fp8"]
    tensors = ref.random_model(cfg, 0)
    dtype, codes = tensors["model.layers.1.mlp.experts.0.gate_proj.weight"]
    assert dtype == "F8_E4M3" and codes.shape == (24, 64)
    assert tensors["model.layers.1.mlp.experts.0.gate_proj.weight_scale_inv"].shape == (2, 4)
    assert tensors["model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv"].shape == (3, 4)  # 40 rows
    assert tensors["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"].shape == (8, 2)  # 24 cols
    assert tensors["model.layers.1.mlp.gate.weight"].dtype == np.float32  # the router stays float
    assert "model.layers.1.mlp.gate.weight_scale_inv" not in tensors
    _, quantized = _saved(tmp_path, "fp8", cfg, tensors)
    assert not any(name.endswith("_scale_inv") for name in quantized)
    w = quantized["model.layers.1.mlp.experts.0.gate_proj.weight"]
    scale = tensors["model.layers.1.mlp.experts.0.gate_proj.weight_scale_inv"]
    assert float(w[17, 50]) == float(ref.E4M3[codes[17, 50]]) * float(scale[1, 3])
    plain_cfg = {k: v for k, v in cfg.items() if k != "quantization_config"}
    _, plain = _saved(tmp_path, "plain", plain_cfg, {k: v.numpy().astype(np.float32) for k, v in quantized.items()})
    tokens = np.random.default_rng(1).integers(0, cfg["vocab_size"], size=(2, 24))
    a, b = ref.forward(cfg, quantized, tokens), ref.forward(plain_cfg, plain, tokens)
    assert float(a.abs().max()) > 1 and ref.relative_error(b.numpy(), a.numpy()) < 1e-6


def test_oracle_phi3_is_mistral_with_split_weights():
    """No lowp: Phi-3 without rope scaling is Mistral (a window on every
    layer) with qkv_proj split into q, k, v rows and gate_up_proj into gate,
    up halves."""
    cfg = CASES["phi3"]
    weights = ref.random_weights(cfg, 0)
    mistral = {**cfg, "model_type": "mistral", "architectures": ["MistralForCausalLM"]}
    s = ref.Spec(cfg)
    q, kv, inter = s.heads * s.head_dim, s.kv_heads * s.head_dim, cfg["intermediate_size"]
    split = {}
    for name, w in weights.items():
        if name.endswith("qkv_proj.weight"):
            for part, rows in zip("qkv", w.split([q, kv, kv])):
                split[name.replace("qkv_proj", f"{part}_proj")] = rows
        elif name.endswith("gate_up_proj.weight"):
            for part, rows in zip(("gate", "up"), w.split(inter)):
                split[name.replace("gate_up_proj", f"{part}_proj")] = rows
        else:
            split[name] = w
    assert set(split) == set(ref.tensor_shapes(mistral))
    tokens = np.random.default_rng(2).integers(0, cfg["vocab_size"], size=(2, 24))
    a, b = ref.forward(cfg, weights, tokens), ref.forward(mistral, split, tokens)
    assert float(a.abs().max()) > 1 and torch.equal(a, b)


def test_oracle_rope_frequencies_follow_transformers_formulas():
    """No lowp: YaRN and LongRoPE frequencies and attention factors of the
    cases, against the numbers written out by hand from the formulas."""
    s = ref.Spec(CASES["gpt_oss_mxfp4"])  # d 16, theta 1e4, factor 4, L0 64, betas 32/1, no truncation
    inv, attention = ref.inv_frequencies(s, 24)
    low = max(16 * math.log(64 / (32 * 2 * math.pi)) / (2 * math.log(1e4)), 0)
    high = 16 * math.log(64 / (2 * math.pi)) / (2 * math.log(1e4))
    base = 1e4 ** (-np.arange(0, 16, 2) / 16)
    ramp = np.clip((np.arange(8) - low) / (high - low), 0, 1)
    np.testing.assert_allclose(inv.numpy(), base * (1 - ramp) + base / 4 * ramp, rtol=1e-15)
    assert 0 < ramp[1] < 1 and attention == 0.1 * math.log(4) + 1
    s = ref.Spec(CASES["deepseek_v3_q_lora"])  # d 8, truncated, mscale 1 / mscale_all_dim 0.707
    inv, attention = ref.inv_frequencies(s, 24)
    np.testing.assert_allclose(attention, (0.1 * math.log(4) + 1) / (0.0707 * math.log(4) + 1), rtol=1e-15)
    np.testing.assert_allclose(inv.numpy(), 1e4 ** (-np.arange(0, 8, 2) / 8) * [1, 0.625, 0.25, 0.25], rtol=1e-15)
    assert s.scaling == pytest.approx(24 ** -0.5 * (0.0707 * math.log(4) + 1) ** 2, rel=1e-15)
    for name, factors in (("phi3_longrope_partial", "short_factor"), ("phi3_longrope_long", "long_factor")):
        cfg = CASES[name]
        s = ref.Spec(cfg)
        inv, attention = ref.inv_frequencies(s, 24)
        assert s.rope_dim == 12
        L0 = cfg["original_max_position_embeddings"]
        np.testing.assert_allclose(inv.numpy(), 1e4 ** (-np.arange(0, 12, 2) / 12) / cfg["rope_scaling"][factors])
        assert attention == pytest.approx(math.sqrt(1 + math.log(256 / L0) / math.log(L0)), rel=1e-15)


@pytest.mark.parametrize("name", ["qwen3_moe", "mixtral_4x2", "gpt_oss_mxfp4", "deepseek_v3_fp8"])
def test_routing_against_the_oracles_experts(tmp_path, name):
    """lowp.eval's routing report: the reference's expert load is the
    oracle's router's on the same tokens; a candidate that changes nothing
    upstream of the routers agrees with it on every token; a quantized one
    agrees less, consistently (order <= set, loads sum to tokens * k)."""
    cfg, seed = make_model(tmp_path, name)
    tokens = np.random.default_rng(7).integers(0, cfg["vocab_size"], size=(3, 20)).astype(np.int32)
    routes = {}
    ref.forward(*ref.load_model(tmp_path), tokens, routes=routes)
    same = "*.self_attn.q_proj.weight=fp32"  # float32 into float32: the reference itself
    r = lowp.eval(model=tmp_path, tokens=tokens, weights=f"{same},int4-g32")
    exact, quantized = r["candidates"]
    assert [x["layer"] for x in exact["routing"]] == sorted(routes)
    k = cfg["num_experts_per_tok"]
    for layer in exact["routing"]:
        taken = routes[layer["layer"]].reshape(-1).numpy()
        experts = len(layer["reference_expert_load"])
        assert layer["reference_expert_load"] == np.bincount(taken, minlength=experts).tolist()
        assert layer["tokens"] == tokens.size
        assert layer["topk_set_agreement"] == layer["topk_order_agreement"] == 1.0
        assert layer["top1_changed"] == 0.0 and layer["max_load_change"] == 0.0
        assert layer["expert_load"] == layer["reference_expert_load"]
    for layer in quantized["routing"]:
        assert sum(layer["expert_load"]) == sum(layer["reference_expert_load"]) == tokens.size * k
        assert 0 <= layer["topk_order_agreement"] <= layer["topk_set_agreement"] <= 1
    assert min(x["topk_set_agreement"] for x in quantized["routing"]) < 1


def test_imatrix_counts_each_experts_tokens_as_the_oracle_routes_them(tmp_path):
    """lowp.imatrix's merged expert entries count, per expert, the tokens the
    oracle's router sends it; experts under min_expert_tokens are listed."""
    cfg, _ = make_model(tmp_path, "qwen3_moe")
    tokens = np.random.default_rng(11).integers(0, cfg["vocab_size"], size=(2, 24)).astype(np.int32)
    routes = {}
    ref.forward(*ref.load_model(tmp_path), tokens, routes=routes)
    r = lowp.imatrix(model=tmp_path, tokens=tokens, min_expert_tokens=10)
    entries = {e["name"]: e for e in r["entries"]}
    assert r["min_expert_tokens"] == 10
    for layer, top in routes.items():
        want = np.bincount(top.reshape(-1).numpy(), minlength=cfg["num_experts"])
        for kind in ("gate", "up", "down"):
            e = entries[f"blk.{layer}.ffn_{kind}_exps.weight"]
            assert e["matrices"] == cfg["num_experts"]
            assert e["counts"] == want.tolist()
            assert e["experts_under_min"] == [int(j) for j in np.flatnonzero(want < 10)]
    assert "blk.1.ffn_gate_exps.weight" not in entries  # layer 1 is dense (mlp_only_layers)
    assert "blk.1.ffn_gate.weight" in entries
    with pytest.raises(ValueError, match="min_expert_tokens"):
        lowp.imatrix(model=tmp_path, tokens=tokens, min_expert_tokens=-1)


@pytest.mark.parametrize("fmt", ["compressed-tensors", "gptq"])
def test_moe_checkpoint_written_keeps_routers_and_reads_back(tmp_path, fmt):
    """A plain scheme takes the experts, never the routers (a rule must name
    them): the written checkpoint leaves them float (compressed-tensors'
    ignore lists them) and reads back as the candidate's KL exactly."""
    cfg, _ = make_model(tmp_path / "model", "qwen3_moe")
    out = tmp_path / "out"
    lowp.quantize_model(model=tmp_path / "model", weights="int4-g32", out=out, format=fmt, summary=True)
    with open(out / "config.json") as f:
        q = json.load(f)["quantization_config"]
    if fmt == "compressed-tensors":
        assert "model.layers.0.mlp.gate" in q["ignore"] and "model.layers.2.mlp.gate" in q["ignore"]
    tokens = np.random.default_rng(3).integers(0, cfg["vocab_size"], size=(2, 16)).astype(np.int32)
    r = lowp.eval(model=tmp_path / "model", tokens=tokens, weights="int4-g32",
                  weights_file=out / "model.safetensors")
    rules, read_back = r["candidates"]
    assert rules["kl_mean"] > 0 and read_back["kl_mean"] == rules["kl_mean"]
    assert read_back["routing"] == rules["routing"]


def test_qwen3_moe_gguf_reads_back_as_its_candidate(tmp_path):
    """The GGUF writer's qwen3moe: experts merged into ffn_*_exps (read back
    expert by expert), the router F32; a config llama.cpp's qwen3moe cannot
    run (top-k weights not renormalized, dense layers) is refused."""
    cfg = {**CASES["qwen3_moe"], "norm_topk_prob": True, "mlp_only_layers": [], "hidden_size": 64,
           "moe_intermediate_size": 32, "intermediate_size": 64,
           "use_sliding_window": False, "vocab_size": 512}
    ref.save_model(tmp_path / "model", cfg, ref.random_model(cfg, 5))
    tok = os.path.join(DATA, "stories260K", "tok512.bin")
    out = tmp_path / "m.gguf"
    lowp.quantize_model(model=tmp_path / "model", weights="q4_0", out=out, tokenizer=tok, summary=True)
    tokens = np.random.default_rng(5).integers(0, 512, size=(2, 16)).astype(np.int32)
    r = lowp.eval(model=tmp_path / "model", tokens=tokens, weights="q4_0", weights_file=out)
    rules, read_back = r["candidates"]
    assert rules["kl_mean"] > 0 and read_back["kl_mean"] == rules["kl_mean"]
    assert read_back["routing"] == rules["routing"]
    for bad, field in [({"norm_topk_prob": False}, "norm_topk_prob"), ({"mlp_only_layers": [1]}, "mlp_only_layers")]:
        d = tmp_path / field
        ref.save_model(d, {**cfg, **bad}, ref.random_model({**cfg, **bad}, 5))
        with pytest.raises(ValueError, match=field):
            lowp.quantize_model(model=d, weights="q4_0", out=tmp_path / "bad.gguf", tokenizer=tok)
    assert not (tmp_path / "bad.gguf").exists()


def test_sharded_model_equals_single_file(tmp_path):
    """model.safetensors.index.json + shards: the same logits, bit for bit."""
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    cfg, _ = make_model(single, "llama_biases_llama3_rope")
    make_model(sharded, "llama_biases_llama3_rope", shards=3)
    assert not (sharded / "model.safetensors").exists()
    tokens = np.random.default_rng(7).integers(0, cfg["vocab_size"], size=(2, 24))
    np.testing.assert_array_equal(lowp.forward(str(sharded), tokens), lowp.forward(str(single), tokens))


# ------------------------------------------------------------ the bundled model


@functools.lru_cache(maxsize=None)
def stories():
    return ref.load_model(STORIES)


@functools.lru_cache(maxsize=None)
def oracle_greedy(length):
    """The oracle's greedy chain from BOS (about 5 s for 201 tokens: every
    step is a full forward pass, no cache to get wrong)."""
    return ref.greedy(*stories(), length)


def test_stories_config_is_what_the_oracle_reads():
    cfg, weights = stories()
    s = ref.Spec(cfg)
    assert (s.family, s.hidden, s.layers, s.heads, s.kv_heads, s.head_dim, s.vocab) == ("llama", 64, 5, 8, 4, 8, 512)
    assert (s.eps, s.tied, s.qkv_bias) == (1e-5, False, False)
    assert set(weights) == set(ref.tensor_shapes(cfg))


def test_oracle_greedy_story_is_llama2c_expected_output():
    """Oracle self-check, no lowp: the float64 forward pass of stories260K-hf,
    greedy from BOS, printed as run.c prints, is llama2.c's expected text.
    run.c -n 200 forwards positions 0..199 and prints the token sampled at
    each, so 200 pieces: 201 tokens counting BOS."""
    pieces = ref.load_llama2c_vocab(TOKENIZER)
    tokens = oracle_greedy(LLAMA2C_STEPS + 1)
    assert ref.llama2c_output(pieces, tokens, LLAMA2C_STEPS) == LLAMA2C_EXPECTED


def test_stories_sampled_and_fixed_tokens_match_oracle():
    sampled = lowp.sample(STORIES, count=4, length=64, seed=1)
    assert sampled.dtype == np.int32 and sampled.shape == (4, 64)
    assert np.all(sampled[:, 0] == 1) and sampled.min() >= 0 and sampled.max() < 512
    np.testing.assert_array_equal(lowp.sample(STORIES, count=4, length=64, seed=1), sampled)  # seeded
    assert len({row.tobytes() for row in sampled}) > 1  # the rows are not one stream repeated

    fixed = np.random.default_rng(2024).integers(0, 512, size=(2, 96)).astype(np.int64)
    fixed[:, 0] = 1
    for label, tokens in (("stories260K sampled 4x64", sampled), ("stories260K fixed 2x96", fixed)):
        ours = lowp.forward(STORIES, tokens)
        assert ours.dtype == np.float32 and ours.shape == tokens.shape + (512,)
        check_close(ours, ref.forward(*stories(), tokens).numpy(), label)

    # 1-D tokens give [seq_len, vocab], the same numbers as the row of a batch
    one = lowp.forward(STORIES, fixed[1])
    assert one.shape == (96, 512)
    check_close(one, ref.forward(*stories(), fixed[1]).numpy(), "stories260K 1-D")


def test_stories_greedy_sample_is_oracle_greedy_chain():
    """temperature 0: each token is the oracle's argmax after the ones
    before it. One oracle pass over lowp's tokens suffices: if every token is
    the argmax of its prefix, the two chains are the same chain."""
    tokens = lowp.sample(STORIES, count=1, length=200, temperature=0.0)
    assert tokens.shape == (1, 200) and tokens[0, 0] == 1
    logits = ref.forward(*stories(), tokens[0]).numpy()
    argmax = np.argmax(logits[:-1], axis=-1)  # first maximum: ties to the lowest id
    mismatch = np.flatnonzero(argmax != tokens[0, 1:])
    assert mismatch.size == 0, f"greedy token {mismatch[0] + 1} is not the oracle's argmax"
    # the margins are wide enough that float32 and float64 argmaxes agree
    np.testing.assert_array_equal(tokens[0], oracle_greedy(LLAMA2C_STEPS + 1)[:200])


def test_stories_greedy_story_is_llama2c_expected_output():
    """lowp's greedy tokens printed as run.c prints them (see the oracle
    self-check for why 201 tokens mirror -n 200)."""
    pieces = ref.load_llama2c_vocab(TOKENIZER)
    tokens = lowp.sample(STORIES, count=1, length=LLAMA2C_STEPS + 1, temperature=0.0)[0]
    assert ref.llama2c_output(pieces, tokens, LLAMA2C_STEPS) == LLAMA2C_EXPECTED


def test_forward_is_thread_count_independent():
    tokens = np.random.default_rng(5).integers(0, 512, size=(3, 80))
    logits = [lowp.forward(STORIES, tokens, threads=n) for n in (1, 2, 3)]
    for n, other in zip((2, 3), logits[1:]):
        assert np.array_equal(logits[0], other), f"threads={n} differs from threads=1"


def test_bad_tokens_are_value_errors():
    with pytest.raises(ValueError):
        lowp.forward(STORIES, np.array([[1, 512]]))  # vocab_size is 512
    with pytest.raises(ValueError):
        lowp.forward(STORIES, np.array([[1, -1]]))
    with pytest.raises(ValueError):
        lowp.forward(STORIES, np.ones((1, 2, 3), dtype=np.int64))


# Fields of a candidate that count the matrices a variant made: with experts
# read one at a time, an expert no token routes to is never made.
MADE_MATRICES = ("weight_matrices", "weights_bits_per_weight", "weights_sqnr_db")


@pytest.mark.parametrize("name", ["qwen3_moe", "qwen2_moe_shared", "mixtral_4x2", "gpt_oss_mxfp4",
                                  "gpt_oss_dense", "deepseek_v3_q_lora", "deepseek_v3_fp8",
                                  "phi3_longrope_partial", "llama_biases_llama3_rope"])
def test_matrices_read_one_at_a_time_give_the_same_results(tmp_path, name):
    """lowp.eval(matrices="one-at-a-time") loads each matrix, and each expert
    a token routes to, as the forward pass reaches it, for the reference,
    rule candidates and a file candidate: every metric, the routing and the
    census equal reading the layer whole, bit for bit."""
    cfg, seed = make_model(tmp_path / "model", name)
    tokens = np.random.default_rng(7 + seed).integers(0, cfg["vocab_size"], size=(3, 24))
    np.save(tmp_path / "tokens.npy", tokens.astype(np.int32))
    runs = {reads: lowp.eval(model=tmp_path / "model", tokens=tmp_path / "tokens.npy",
                             weights=["int4-g16", "q8_0"], activations=["none", "int8-channel"],
                             weights_file=[tmp_path / "model" / "model.safetensors"],
                             matrices=reads, threads=2)
            for reads in ("whole", "one-at-a-time")}
    whole, one = runs["whole"], runs["one-at-a-time"]
    assert len(whole["candidates"]) == len(one["candidates"]) >= 5
    for a, b in zip(whole["candidates"], one["candidates"]):
        assert a.get("routing") or "experts" not in json.dumps(cfg), a["label"]
        for key in a:
            if key not in MADE_MATRICES:
                assert a[key] == b[key], (a["label"], key)
    # the file candidate is the reference's own file
    own = [c for c in whole["candidates"] if c["weights_file"] and c["activations"] is None]
    assert len(own) == 1 and own[0]["kl_max"] == 0
    with pytest.raises(ValueError, match="matrices"):
        lowp.eval(model=tmp_path / "model", tokens=tmp_path / "tokens.npy", weights=["q8_0"],
                  matrices="some")


def test_mix_groups_a_layers_experts_by_kind(tmp_path):
    """lowp.mix on a mixture of experts: each layer's routed experts of one
    kind (gate, up, down) are one group, named by a glob its rule takes and
    by llama.cpp's merged tensor; routers and attention are groups of their
    own. expert_groups="each" gives every expert's matrix its own group, and
    then no llama-quantize line (llama.cpp types a layer's experts together)."""
    cfg, _ = make_model(tmp_path / "model", "qwen3_moe")
    args = dict(model=tmp_path / "model", bits_per_weight=6.0, types=["int8-channel", "int4-g8"],
                sample="2:16", tune_sample="2:16", baselines=["none"], threads=2)
    layer = lowp.mix(**args)
    groups = {g["tensor"]: g for g in layer["sensitivity"]}
    merged = groups["model.layers.0.mlp.experts.*.gate_proj.weight"]
    assert merged["llama_cpp"] == "blk.0.ffn_gate_exps.weight"
    assert merged["weights"] == cfg["num_experts"] * cfg["moe_intermediate_size"] * cfg["hidden_size"]
    assert "model.layers.0.mlp.gate.weight" in groups            # the router
    assert "model.layers.1.mlp.gate_proj.weight" in groups       # layer 1 is dense
    assert not any(".experts.0." in name for name in groups)
    # 2 MoE layers x 3 kinds, 1 dense layer x 3, 3 layers x 4 attention, 2 routers, lm_head, embedding
    assert len(groups) == 6 + 3 + 12 + 2 + 2
    # int4-g8 is no llama.cpp type: the line is refused for that, not for the groups
    assert "merged" not in layer["llama_quantize"].get("error", "")
    # The predicted sweep's weight error of a merged group is over all its
    # experts: sum e^2 / sum x^2 of quant_error's rows for them.
    q = lowp.quant_error(str(tmp_path / "model" / "model.safetensors"), ["int4-g8"],
                         tensors=["model.layers.0.mlp.experts.*.gate_proj.weight"], threads=2)
    rows = q["results"]
    assert len(rows) == cfg["num_experts"]
    error = sum(r["mse"] * r["measured"] for r in rows)
    inputs = sum(r["mse"] * r["measured"] * 10 ** (r["sqnr_db"] / 10) for r in rows)
    assert merged["weight_error"]["int4-g8"] == pytest.approx(error / inputs, rel=1e-9)
    assert merged["kl_measured"] == ["int4-g8"]  # the probe: the smaller of the two
    # A router's rounding switches experts, a step: measured in every type.
    assert groups["model.layers.0.mlp.gate.weight"]["kl_measured"] == ["int8-channel", "int4-g8"]
    each = lowp.mix(**args, expert_groups="each")
    names = [g["tensor"] for g in each["sensitivity"]]
    assert len(names) == len(groups) - 6 + 6 * cfg["num_experts"]
    assert "model.layers.2.mlp.experts.7.down_proj.weight" in names
    assert "merged" in each["llama_quantize"]["error"]
    with pytest.raises(ValueError, match="expert_groups"):
        lowp.mix(**args, expert_groups="some")


def test_a_file_candidates_stored_bits_count_each_part_once(tmp_path):
    """Stacked and fused tensors read as parts (gpt-oss's MXFP4 experts,
    Phi-3's qkv_proj and gate_up_proj) are counted at their own share of the
    stored bytes: MXFP4 at 4.25 bits a weight (4-bit codes, an 8-bit scale
    per 32), float32 matrices at 32."""
    for name in ("gpt_oss_mxfp4", "phi3_longrope_partial"):
        cfg, _ = make_model(tmp_path / name, name)
        tokens = np.zeros((1, 8), np.int32)
        np.save(tmp_path / name / "t.npy", tokens)
        c = lowp.eval(model=tmp_path / name, tokens=tmp_path / name / "t.npy",
                      weights_file=[tmp_path / name / "model.safetensors"])["candidates"][0]
        assert c["kl_max"] == 0
        if name.startswith("phi3"):
            assert c["weights_bits_per_weight"] == 32
            continue
        H, L, E, I = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_local_experts"], cfg["intermediate_size"]
        experts = L * E * 3 * I * H
        floats = L * (2 * H * cfg["num_attention_heads"] * cfg["head_dim"]
                      + 2 * H * cfg["num_key_value_heads"] * cfg["head_dim"] + E * H) + 2 * cfg["vocab_size"] * H
        assert c["weights_bits_per_weight"] == pytest.approx((4.25 * experts + 32 * floats) / (experts + floats))


@pytest.mark.parametrize("name,field,value,message", [
    # the stacked experts' shape names the tensor and the config fields it contradicts
    ("gpt_oss_mxfp4", "intermediate_size", 32,
     r"gate_up_proj has shape \[4, 128, 64\].*\[4, 64, 64\] \(num_local_experts, 2 \* intermediate_size"),
    ("gpt_oss_dense", "hidden_size", 32, r"hidden_size"),
    # Phi-3's fused q, k, v rows
    ("phi3", "num_key_value_heads", 4, r"qkv_proj.weight has shape \[128, 64\].*2 num_key_value_heads"),
    # DeepSeek-V3's latent: kv_a_proj_with_mqa is kv_lora_rank + qk_rope_head_dim wide
    ("deepseek_v3_q_lora", "kv_lora_rank", 20, r"kv_a_proj_with_mqa.*kv_lora_rank \+ qk_rope_head_dim"),
])
def test_a_layout_the_config_contradicts_is_named(tmp_path, name, field, value, message):
    """A checkpoint whose stacked, fused or latent tensors do not fit the
    config is refused before anything runs, naming the tensor and the fields."""
    cfg, _ = make_model(tmp_path, name)
    with open(tmp_path / "config.json", "w") as f:
        json.dump({**cfg, field: value}, f)
    with pytest.raises(ValueError, match=message):
        lowp.forward(tmp_path, np.zeros((1, 4), np.int64))


def test_calibrated_rules_need_matrices_read_whole(tmp_path):
    """GPTQ runs on whole layers: a calibrated rule with matrices read one
    at a time is refused naming the option (auto reads whole when a
    candidate calibrates)."""
    make_model(tmp_path, "llama")
    np.save(tmp_path / "t.npy", np.zeros((1, 8), np.int32))
    args = dict(model=tmp_path, tokens=tmp_path / "t.npy", weights=["int4-g12:gptq"], calib_sample="2:16")
    whole = lowp.eval(**args, matrices="whole")["candidates"][0]
    assert lowp.eval(**args)["candidates"][0]["kl_mean"] == whole["kl_mean"] > 0
    with pytest.raises(ValueError, match="read one at a time.*matrices read whole"):
        lowp.eval(**args, matrices="one-at-a-time")



def test_mla_kv_format_stores_the_latent(tmp_path):
    """`eval --kv bf16` on DeepSeek-V3 rounds what vLLM and llama.cpp cache, each
    token's normed latent and rotated key part, not the heads' expanded keys and
    values: its mean KL is the oracle's with the latent rounded, and not the one
    with k and v rounded (which differs by more than the tolerance)."""
    cfg, _ = make_model(tmp_path, "deepseek_v3_q_lora")
    _, weights = ref.load_model(tmp_path)
    tokens = np.arange(1, 25) % cfg["vocab_size"]
    bf16 = lambda x: x.to(torch.bfloat16).to(torch.float64)  # noqa: E731
    p = torch.log_softmax(ref.forward(cfg, weights, tokens), -1)

    def kl(**store):
        q = torch.log_softmax(ref.forward(cfg, weights, tokens, **store), -1)
        return float((p.exp() * (p - q)).sum(-1).mean())

    latent, heads = kl(kv_store=bf16), kl(kv_heads_store=bf16)
    ours = lowp.eval(model=str(tmp_path), tokens=[tokens.tolist()], kv="bf16")["candidates"][-1]
    assert latent > 0 and abs(heads - latent) > 0.05 * latent
    assert ours["kl_mean"] == pytest.approx(latent, rel=0.02)


def test_longrope_takes_the_long_factors_by_the_sequences_length(tmp_path):
    """A whole sequence within original_max_position_embeddings rotates by
    the short factors, a longer one by the long factors from its first token
    (transformers' dynamic update), so its first 16 logits differ from the
    same tokens run alone; a sequence generated token by token stops at the
    original length, naming the long factors the cache would not follow."""
    cfg, _ = make_model(tmp_path, "phi3_longrope_long")
    tokens = np.arange(1, 25) % cfg["vocab_size"]
    whole = lowp.forward(tmp_path, tokens)
    short = lowp.forward(tmp_path, tokens[:16])
    oracle_short = ref.forward(*ref.load_model(tmp_path), tokens[:16]).numpy()
    check_close(short, oracle_short, "phi3_longrope_long[:16]")
    assert np.abs(whole[:16] - short).max() > 0.1
    with pytest.raises(ValueError, match="long_factor"):
        lowp.sample(model=str(tmp_path), count=1, length=24)
