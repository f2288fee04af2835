"""GGUF files of the 2026 architectures (lowp.quantize_model with out=*.gguf):
each tensor under llama.cpp's name and in its layout, as llama.cpp's loader
creates it (src/models/qwen2moe.cpp, phi3.cpp, openai-moe.cpp, deepseek2.cpp
at ggml-org/llama.cpp 34af94cd, 2026-08-17) and convert_hf_to_gguf.py writes
it, with the values of the checkpoint the tensors came from; the keys those
loaders read; and what llama.cpp would run differently refused by name.

bench/llama_cpp_archs.py runs the same files in llama.cpp itself: the float32
files' logits equal lowp.forward's to 4e-6 of the logits' spread.
"""
import os
import struct

import numpy as np
import pytest

import lowp
import torch_reference as ref
from test_forward_torch import CASES

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
TOKENIZER = os.path.join(DATA, "stories260K", "tok512.bin")

# The cases as llama.cpp can run them (what each change avoids is refused
# by test_what_llama_cpp_runs_otherwise_is_refused), with a vocabulary
# stories260K's tokenizer fits.
ARCH_CASES = {
    "qwen2_moe_shared": {},
    "phi3": {"sliding_window": None},
    "phi3_longrope_partial": {"sliding_window": None},
    "gpt_oss_mxfp4": {"swiglu_limit": 7.0},
    "gpt_oss_dense": {},
    "deepseek_v3_q_lora": {"rope_scaling": {**CASES["deepseek_v3_q_lora"]["rope_scaling"],
                                            "mscale_all_dim": 1.0}},
    "deepseek_v3_fp8": {},
}


def gguf_metadata(path):
    """key -> value of a GGUF file's scalar and string keys (arrays skipped)."""
    with open(path, "rb") as f:
        b = f.read(1 << 20)
    _, _, _, count = struct.unpack_from("<4sIqq", b, 0)
    at, out = 24, {}
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}

    def value(kind, at):
        if kind == 8:
            (n,) = struct.unpack_from("<Q", b, at)
            return b[at + 8:at + 8 + n].decode(), at + 8 + n
        if kind == 9:
            element, n = struct.unpack_from("<IQ", b, at)
            at += 12
            for _ in range(n):
                _, at = value(element, at)
            return None, at
        (v,) = struct.unpack_from(scalar[kind], b, at)
        return v, at + struct.calcsize(scalar[kind])

    for _ in range(count):
        (n,) = struct.unpack_from("<Q", b, at)
        key = b[at + 8:at + 8 + n].decode()
        (kind,) = struct.unpack_from("<I", b, at + 8 + n)
        v, at = value(kind, at + 12 + n)
        if v is not None:
            out[key] = (kind, v)
    return out


def write(tmp_path, name, weights="fp32", **changes):
    changes = {**ARCH_CASES.get(name, {}), **changes}
    cfg = {**CASES[name], "vocab_size": 512, **changes}
    cfg = {k: v for k, v in cfg.items() if not (k in changes and v is None)}
    model = tmp_path / "model"
    model.mkdir()
    tensors = ref.random_model(cfg, list(CASES).index(name))
    ref.save_model(model, cfg, tensors)
    out = str(tmp_path / "model.gguf")
    lowp.quantize_model(model=str(model), tokenizer=TOKENIZER, weights=weights, out=out, quiet=True)
    _, weights = ref.load_model(model)
    return cfg, {k: v.numpy() for k, v in weights.items()}, out


def expected(cfg, w):
    """The tensors llama.cpp's loader creates for the checkpoint `w` (name ->
    float array, shapes as PyTorch orders them: ggml's ne reversed)."""
    t = cfg["model_type"]
    out = {"token_embd.weight": w["model.embed_tokens.weight"],
           "output_norm.weight": w["model.norm.weight"]}
    if not cfg.get("tie_word_embeddings"):
        out["output.weight"] = w["lm_head.weight"]
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."

        def put(gguf, hf):
            out[b + gguf] = w[p + hf]

        put("attn_norm.weight", "input_layernorm.weight")
        put("post_attention_norm.weight" if t == "gpt_oss" else "ffn_norm.weight",
            "post_attention_layernorm.weight")
        put("attn_output.weight", "self_attn.o_proj.weight")
        if t == "phi3":  # fused as stored: q, k, v; gate, then up
            put("attn_qkv.weight", "self_attn.qkv_proj.weight")
            put("ffn_up.weight", "mlp.gate_up_proj.weight")
            put("ffn_down.weight", "mlp.down_proj.weight")
            continue
        if t == "deepseek_v3":
            if cfg.get("q_lora_rank"):
                put("attn_q_a.weight", "self_attn.q_a_proj.weight")
                put("attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight")
                put("attn_q_b.weight", "self_attn.q_b_proj.weight")
            else:
                put("attn_q.weight", "self_attn.q_proj.weight")
            put("attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight")
            put("attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight")
            heads, nope, v = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
            kv_b = w[p + "self_attn.kv_b_proj.weight"].reshape(heads, nope + v, -1)
            out[b + "attn_k_b.weight"] = kv_b[:, :nope, :].transpose(0, 2, 1)
            out[b + "attn_v_b.weight"] = kv_b[:, nope:, :]
        else:
            for proj, name in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v")):
                put(f"{name}.weight", f"self_attn.{proj}_proj.weight")
                if p + f"self_attn.{proj}_proj.bias" in w:
                    put(f"{name}.bias", f"self_attn.{proj}_proj.bias")
            if p + "self_attn.o_proj.bias" in w:
                put("attn_output.bias", "self_attn.o_proj.bias")
        if t == "gpt_oss":
            put("attn_sinks.weight", "self_attn.sinks")
            put("ffn_gate_inp.weight", "mlp.router.weight")
            put("ffn_gate_inp.bias", "mlp.router.bias")
            gate_up = w[p + "mlp.experts.gate_up_proj"]  # [E, in, 2 out], gate the even outputs
            out[b + "ffn_gate_exps.weight"] = gate_up[:, :, ::2].transpose(0, 2, 1)
            out[b + "ffn_up_exps.weight"] = gate_up[:, :, 1::2].transpose(0, 2, 1)
            out[b + "ffn_down_exps.weight"] = w[p + "mlp.experts.down_proj"].transpose(0, 2, 1)
            bias = w[p + "mlp.experts.gate_up_proj_bias"]
            out[b + "ffn_gate_exps.bias"] = bias[:, ::2]
            out[b + "ffn_up_exps.bias"] = bias[:, 1::2]
            put("ffn_down_exps.bias", "mlp.experts.down_proj_bias")
            continue
        if p + "mlp.gate.weight" not in w:  # a dense layer
            for proj in ("gate", "up", "down"):
                put(f"ffn_{proj}.weight", f"mlp.{proj}_proj.weight")
            continue
        put("ffn_gate_inp.weight", "mlp.gate.weight")
        if t == "deepseek_v3":
            put("exp_probs_b.bias", "mlp.gate.e_score_correction_bias")
        experts = cfg.get("num_experts") or cfg.get("n_routed_experts")
        for proj in ("gate", "up", "down"):
            out[b + f"ffn_{proj}_exps.weight"] = np.stack(
                [w[p + f"mlp.experts.{e}.{proj}_proj.weight"] for e in range(experts)])
            shared = "shared_expert" if t == "qwen2_moe" else "shared_experts"
            if p + f"mlp.{shared}.{proj}_proj.weight" in w:
                put(f"ffn_{proj}_shexp.weight", f"mlp.{shared}.{proj}_proj.weight")
        if t == "qwen2_moe":
            out[b + "ffn_gate_inp_shexp.weight"] = w[p + "mlp.shared_expert_gate.weight"].reshape(-1)
    if t == "phi3" and cfg.get("rope_scaling"):
        out["rope_factors_long.weight"] = np.array(cfg["rope_scaling"]["long_factor"])
        out["rope_factors_short.weight"] = np.array(cfg["rope_scaling"]["short_factor"])
    return out


@pytest.mark.parametrize("name", list(ARCH_CASES))
def test_gguf_holds_the_checkpoint_in_llama_cpps_layout(tmp_path, name):
    cfg, w, path = write(tmp_path, name)
    got = lowp.read_tensors(path)
    want = expected(cfg, w)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key].shape == value.shape, key
        np.testing.assert_array_equal(got[key], value.astype(np.float32), err_msg=key)


# The keys each architecture's loader reads (load_arch_hparams), with their
# values for the case and their GGUF types (4 u32, 6 f32, 7 bool, 8 string).
KEYS = {
    "qwen2_moe_shared": {"qwen2moe.expert_feed_forward_length": (4, 20),
                         "qwen2moe.expert_shared_feed_forward_length": (4, 56),
                         "qwen2moe.expert_count": (4, 6), "qwen2moe.expert_used_count": (4, 2)},
    "phi3_longrope_partial": {"phi3.rope.dimension_count": (4, 12),
                              "phi3.attention.sliding_window": (4, 0),
                              "phi3.rope.scaling.original_context_length": (4, 32),
                              "phi3.context_length": (4, 256)},
    "gpt_oss_mxfp4": {"gpt-oss.attention.sliding_window": (4, 8),
                      "gpt-oss.expert_feed_forward_length": (4, 64),
                      "gpt-oss.attention.head_count_kv": (4, 2),
                      "gpt-oss.rope.scaling.type": (8, "yarn"),
                      "gpt-oss.rope.scaling.factor": (6, 4.0),
                      "gpt-oss.rope.scaling.original_context_length": (4, 64)},
    "deepseek_v3_q_lora": {"deepseek2.attention.head_count_kv": (4, 1),
                           "deepseek2.leading_dense_block_count": (4, 1),
                           "deepseek2.attention.q_lora_rank": (4, 32),
                           "deepseek2.attention.kv_lora_rank": (4, 24),
                           "deepseek2.attention.key_length": (4, 32),
                           "deepseek2.attention.value_length": (4, 24),
                           "deepseek2.attention.key_length_mla": (4, 24),
                           "deepseek2.attention.value_length_mla": (4, 12),
                           "deepseek2.rope.dimension_count": (4, 8),
                           "deepseek2.expert_shared_count": (4, 1),
                           "deepseek2.expert_group_count": (4, 2),
                           "deepseek2.expert_group_used_count": (4, 1),
                           "deepseek2.expert_gating_func": (4, 2),
                           "deepseek2.expert_weights_norm": (7, True),
                           "deepseek2.vocab_size": (4, 512)},
}


@pytest.mark.parametrize("name", list(KEYS))
def test_gguf_keys_are_what_llama_cpp_reads(tmp_path, name):
    _, _, path = write(tmp_path, name)
    meta = gguf_metadata(path)
    for key, (kind, value) in KEYS[name].items():
        assert key in meta, key
        assert meta[key][0] == kind, key
        assert meta[key][1] == pytest.approx(value), key
    arch = meta["general.architecture"][1]
    assert arch == {"qwen2_moe": "qwen2moe", "phi3": "phi3", "gpt_oss": "gpt-oss",
                    "deepseek_v3": "deepseek2"}[CASES[name]["model_type"]]
    ds = CASES["deepseek_v3_q_lora"]["rope_scaling"]
    if name == "deepseek_v3_q_lora":  # 0.1 * mscale_all_dim, as the converter writes it
        assert meta["deepseek2.rope.scaling.yarn_log_multiplier"][1] == pytest.approx(0.1)
        assert meta["deepseek2.expert_weights_scale"][1] == pytest.approx(2.5)
        assert ds["mscale"] == 1.0


def test_quantized_files_keep_the_rules_bytes_and_gpt_oss_experts_stay_mxfp4(tmp_path):
    # Attention in q8_0, experts left as OpenAI stores them: MXFP4 in the
    # file (4.25 bits), decoding to the checkpoint's values.
    cfg, w, path = write(tmp_path, "gpt_oss_mxfp4", weights="*.self_attn.*=q8_0")
    info = lowp.tensors(path)["tensors"]
    types = {t["name"]: t["type"] for t in info}
    assert types["blk.0.ffn_gate_exps.weight"] == "mxfp4"
    assert types["blk.0.attn_q.weight"] == "q8_0"
    got = lowp.read_tensors(path, ["blk.1.ffn_down_exps.weight"])
    want = w["model.layers.1.mlp.experts.down_proj"].transpose(0, 2, 1)
    np.testing.assert_array_equal(got["blk.1.ffn_down_exps.weight"], want.astype(np.float32))


def test_deepseek_kv_b_quantized_splits_into_its_rows_and_their_values(tmp_path):
    # attn_v_b is kv_b's own q8_0 rows; attn_k_b its values transposed, in
    # F32 (q8_0's blocks run along kv_b's rows, not the transposed ones).
    cfg, w, path = write(tmp_path, "deepseek_v3_q_lora", weights="*.kv_b_proj.weight=q8_0",
                         kv_lora_rank=32)
    types = {t["name"]: t["type"] for t in lowp.tensors(path)["tensors"]}
    assert types["blk.0.attn_v_b.weight"] == "q8_0"
    assert types["blk.0.attn_k_b.weight"] == "F32"
    got = lowp.read_tensors(path, ["blk.2.attn_k_b.weight", "blk.2.attn_v_b.weight"])
    heads, nope = cfg["num_attention_heads"], cfg["qk_nope_head_dim"]
    kv_b = lowp.quantize(w["model.layers.2.self_attn.kv_b_proj.weight"].astype(np.float32), "q8_0")
    kv_b = kv_b.reshape(heads, -1, kv_b.shape[-1])
    np.testing.assert_array_equal(got["blk.2.attn_k_b.weight"], kv_b[:, :nope].transpose(0, 2, 1))
    np.testing.assert_array_equal(got["blk.2.attn_v_b.weight"], kv_b[:, nope:])


@pytest.mark.parametrize("name,changes,field", [
    ("phi3", {}, "sliding_window"),  # llama.cpp's phi3 attends to the whole context
    ("gpt_oss_mxfp4", {"swiglu_limit": 1.0}, "swiglu_limit"),
    ("gpt_oss_dense", {"layer_types": ["full_attention"] * 3}, "layer_types"),
    ("deepseek_v3_q_lora", {"rope_scaling": CASES["deepseek_v3_q_lora"]["rope_scaling"]}, "mscale"),
    ("deepseek_v3_fp8", {"rope_interleave": False}, "rope_interleave"),
    ("qwen2_moe_shared", {"norm_topk_prob": True}, "norm_topk_prob"),
])
def test_what_llama_cpp_runs_otherwise_is_refused(tmp_path, name, changes, field):
    if name == "phi3":
        changes = {"sliding_window": 8}
    with pytest.raises(ValueError, match=field):
        write(tmp_path, name, **changes)
    assert not os.path.exists(tmp_path / "model.gguf")


def test_gpt_oss_yarn_without_truncation_is_noted(tmp_path):
    cfg = {**CASES["gpt_oss_mxfp4"], "vocab_size": 512, "swiglu_limit": 7.0}
    model = tmp_path / "model"
    model.mkdir()
    ref.save_model(model, cfg, ref.random_model(cfg, 0))
    r = lowp.quantize_model(model=str(model), tokenizer=TOKENIZER, weights="fp32",
                            out=str(tmp_path / "m.gguf"), quiet=True, summary=True)
    assert any("truncate" in note for note in r.get("notes", []))


@pytest.mark.parametrize("name,weights", [
    ("qwen2_moe_shared", "q8_0"), ("phi3", "q8_0"), ("gpt_oss_dense", "q8_0"),
    ("gpt_oss_mxfp4", "*.self_attn.*=q8_0"),
])
def test_a_written_file_reads_back_as_the_candidate(tmp_path, name, weights):
    # Hidden and widths in whole q8_0 blocks.
    changes = {"hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
               "shared_expert_intermediate_size": 64}
    changes = {k: v for k, v in changes.items() if k in CASES[name]}
    cfg, _, path = write(tmp_path, name, weights=weights, **changes)
    r = lowp.eval(model=str(tmp_path / "model"), tokens=[list(range(1, 25))], weights=weights,
                  weights_file=[path])
    rule, file = r["candidates"]
    assert rule["kl_mean"] > 0
    assert file["kl_mean"] == rule["kl_mean"]
    assert file["top1_agreement"] == rule["top1_agreement"]


def test_deepseek_files_are_refused_as_candidates_by_the_split_kv_b(tmp_path):
    _, _, path = write(tmp_path, "deepseek_v3_fp8")
    with pytest.raises(ValueError, match="attn_k_b"):
        lowp.eval(model=str(tmp_path / "model"), tokens=[list(range(1, 25))], weights_file=[path])


def test_phi3_imatrix_is_keyed_by_the_fused_tensors_and_serves_their_parts(tmp_path):
    # llama-quantize looks attn_qkv and ffn_up up in a Phi-3 file; q, k and v
    # (and gate, up) take the same input, so one entry serves each part.
    write(tmp_path, "phi3", hidden_size=64, intermediate_size=96)
    model, out = str(tmp_path / "model"), str(tmp_path / "phi3.imatrix.gguf")
    r = lowp.imatrix(model=model, tokens=[list(range(1, 33))], out=out)
    names = set(r["importance"])
    assert {"blk.0.attn_qkv.weight", "blk.0.ffn_up.weight"} <= names
    assert not names & {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.ffn_gate.weight"}
    # An i-quant that needs an importance matrix finds it for every part.
    e = lowp.eval(model=model, tokens=[list(range(1, 33))], weights="iq2_xxs", imatrix=out)
    assert e["candidates"][-1]["kl_mean"] > 0


def test_phi3_mix_types_each_fused_tensor_as_one(tmp_path):
    write(tmp_path, "phi3", hidden_size=64, intermediate_size=96)
    r = lowp.mix(model=str(tmp_path / "model"), bits_per_weight=6.0, types=["q8_0", "q4_0"],
                 baselines="none", sample=(2, 32), tune_sample=(1, 32))
    patterns = [rule["pattern"] for rule in r["rules"]]
    p = "model.layers.0."
    assert f"{p}self_attn.q_proj.weight,{p}self_attn.k_proj.weight,{p}self_attn.v_proj.weight" in patterns
    assert f"{p}mlp.gate_proj.weight,{p}mlp.up_proj.weight" in patterns
    options = " ".join(r["llama_quantize"]["options"])
    assert "attn_qkv" in options and "ffn_gate" not in options and "attn_q\\\\." not in options
